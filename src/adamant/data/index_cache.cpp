#include "adamant/data/index_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "adamant/core/crc32c.h"
#include "adamant/core/error.h"
#include "adamant/core/file_write.h"

namespace adamant::data {

namespace {

constexpr char kMagic[8] = {'A', 'D', 'I', 'D', 'X', 'v', '0', '1'};

// Fixed-size header, written as is (the file is read back on the same kind of machine).
struct Header {
  char magic[8];
  std::uint64_t documents_begin, documents_end;
  std::int64_t num_samples, tokens_per_epoch;
  std::int32_t seq_length, num_epochs;
  std::uint32_t seed, sizes_checksum;
  char split[16];
  std::uint64_t document_order_count, sample_starts_count, shuffle_order_count;
};
static_assert(sizeof(Header) == 96, "Header has no padding: every byte written is a field");

std::size_t padded(std::size_t bytes) { return (bytes + 7) / 8 * 8; }

Header header_of(const GptIndexKey& key, const GptIndexArrays& arrays) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.documents_begin = key.documents.begin;
  h.documents_end = key.documents.end;
  h.num_samples = key.num_samples;
  h.tokens_per_epoch = arrays.tokens_per_epoch;
  h.seq_length = key.seq_length;
  h.num_epochs = arrays.num_epochs;
  h.seed = key.seed;
  h.sizes_checksum = key.sizes_checksum;
  std::strncpy(h.split, key.split.c_str(), sizeof h.split - 1);
  h.document_order_count = arrays.document_order.size();
  h.sample_starts_count = arrays.sample_starts.size();
  h.shuffle_order_count = arrays.shuffle_order.size();
  return h;
}

bool same_key(const Header& h, const GptIndexKey& key) {
  return std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.documents_begin == key.documents.begin &&
         h.documents_end == key.documents.end && h.num_samples == key.num_samples && h.seq_length == key.seq_length &&
         h.seed == key.seed && h.sizes_checksum == key.sizes_checksum &&
         std::strncmp(h.split, key.split.c_str(), sizeof h.split) == 0;
}

}  // namespace

std::filesystem::path index_cache_file(const std::filesystem::path& dir, const std::filesystem::path& data_prefix,
                                       const GptIndexKey& key) {
  return dir / fmt::format("{}_{}_indexmap_{}ns_{}sl_{}s_{}-{}d.adidx", data_prefix.filename().string(), key.split,
                           key.num_samples, key.seq_length, key.seed, key.documents.begin, key.documents.end);
}

void write_index_cache(const std::filesystem::path& file, const GptIndexKey& key, const GptIndexArrays& arrays) {
  const Header header = header_of(key, arrays);
  const std::uint32_t header_crc = crc32c(&header, sizeof header);
  const std::span<const std::byte> parts[] = {std::as_bytes(arrays.document_order), std::as_bytes(arrays.sample_starts),
                                              std::as_bytes(arrays.shuffle_order)};
  std::uint32_t arrays_crc = 0;
  for (const auto& part : parts) arrays_crc = crc32c(part.data(), part.size(), arrays_crc);

  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  auto temp = file;
  temp += fmt::format(".{}.tmp", static_cast<long>(::getpid()));  // ranks writing at once do not collide
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    ADAMANT_CHECK(out.good(),
                  "cannot write the dataset index cache {}; point model.data.index_mapping_dir at a writable folder "
                  "(or leave it empty to build the index in memory)",
                  temp.string());
    const char zeros[8] = {};
    out.write(reinterpret_cast<const char*>(&header), sizeof header);
    out.write(reinterpret_cast<const char*>(&header_crc), sizeof header_crc);
    out.write(zeros, static_cast<std::streamsize>(padded(sizeof header + sizeof header_crc) -
                                                  (sizeof header + sizeof header_crc)));
    for (const auto& part : parts) {
      out.write(reinterpret_cast<const char*>(part.data()), static_cast<std::streamsize>(part.size()));
      out.write(zeros, static_cast<std::streamsize>(padded(part.size()) - part.size()));
    }
    out.write(reinterpret_cast<const char*>(&arrays_crc), sizeof arrays_crc);
    out.flush();
    ADAMANT_CHECK(out.good(), "writing the dataset index cache {} failed (disk full?); free space in {}", temp.string(),
                  file.parent_path().string());
  }
  rename_into_place(temp, file);
}

std::optional<MappedIndex> open_index_cache(const std::filesystem::path& file, const GptIndexKey& key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  MappedIndex index{MappedFile::open(file), {}};
  const std::span<const std::byte> bytes = index.file.bytes();
  Header header{};
  std::uint32_t header_crc = 0;
  if (bytes.size() < sizeof header + sizeof header_crc) return std::nullopt;
  std::memcpy(&header, bytes.data(), sizeof header);
  std::memcpy(&header_crc, bytes.data() + sizeof header, sizeof header_crc);
  if (crc32c(&header, sizeof header) != header_crc || !same_key(header, key)) return std::nullopt;

  const std::size_t sizes[3] = {header.document_order_count * sizeof(std::int32_t),
                                header.sample_starts_count * sizeof(SampleStart),
                                header.shuffle_order_count * sizeof(std::int64_t)};
  std::size_t offset = padded(sizeof header + sizeof header_crc);
  std::size_t offsets[3];
  for (int i = 0; i < 3; ++i) {
    offsets[i] = offset;
    offset += padded(sizes[i]);
  }
  if (bytes.size() != offset + sizeof(std::uint32_t)) return std::nullopt;
  std::uint32_t arrays_crc = 0, stored_crc = 0;
  for (int i = 0; i < 3; ++i) arrays_crc = crc32c(bytes.data() + offsets[i], sizes[i], arrays_crc);
  std::memcpy(&stored_crc, bytes.data() + offset, sizeof stored_crc);
  if (arrays_crc != stored_crc) return std::nullopt;

  // The mapping is page-aligned and every array starts 8-byte aligned within it.
  index.arrays.document_order = {reinterpret_cast<const std::int32_t*>(bytes.data() + offsets[0]),
                                 header.document_order_count};
  index.arrays.sample_starts = {reinterpret_cast<const SampleStart*>(bytes.data() + offsets[1]),
                                header.sample_starts_count};
  index.arrays.shuffle_order = {reinterpret_cast<const std::int64_t*>(bytes.data() + offsets[2]),
                                header.shuffle_order_count};
  index.arrays.num_epochs = header.num_epochs;
  index.arrays.tokens_per_epoch = header.tokens_per_epoch;
  return index;
}

}  // namespace adamant::data
