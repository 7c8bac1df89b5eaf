#include "adamant/core/archive.h"

#include <array>
#include <cstring>

#include "adamant/core/error.h"

namespace adamant {

namespace {

constexpr char kMagic[8] = {'A', 'D', 'M', 'A', 'R', 'C', 'H', '1'};
constexpr char kEndMagic[8] = {'A', 'D', 'M', 'A', 'R', 'E', 'N', 'D'};
constexpr std::uint64_t kBlobAlignment = 64;
constexpr std::size_t kFooterBytes = 8 + 4 + 8;

[[noreturn]] void fail_damaged(const std::string& file, std::string_view what) {
  fail("checkpoint file {} is damaged ({}); it may have been truncated or overwritten: use another checkpoint", file,
       what);
}

// One field of a tensor's header entry: a missing field or one of the wrong type is damage.
template <typename T>
T entry_field(const nlohmann::json& tensor, const char* key, const std::string& file) {
  if (tensor.is_object()) {
    const auto it = tensor.find(key);
    try {
      if (it != tensor.end()) return it->get<T>();
    } catch (const nlohmann::json::exception&) {
    }
  }
  fail_damaged(file, fmt::format("a tensor's '{}' is missing or of the wrong type", key));
}

DType dtype_from_name(const std::string& name, const std::filesystem::path& path) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u16, DType::u8}) {
    if (dtype_name(t) == name) return t;
  }
  fail("checkpoint file {} names an unknown data type '{}'; it was written by a newer Adamant or is damaged",
       path.string(), name);
}

}  // namespace

ArchiveWriter::ArchiveWriter(std::filesystem::path path) : file_(std::move(path), "checkpoint file") {
  file_.write(kMagic, sizeof(kMagic));
}

void ArchiveWriter::add(const std::string& name, const void* data, DType dtype, std::vector<std::int64_t> shape) {
  ADAMANT_CHECK(!committed_, "ArchiveWriter::add after commit");
  for (const auto& e : entries_)
    ADAMANT_CHECK(e.name != name, "checkpoint {}: tensor '{}' added twice", file_.path().string(), name);
  std::uint64_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::uint64_t>(d);
  const std::uint64_t bytes = numel * dtype_size(dtype);
  static constexpr std::array<char, kBlobAlignment> kZeros{};
  file_.write(kZeros.data(), (kBlobAlignment - file_.position() % kBlobAlignment) % kBlobAlignment);
  entries_.push_back({name, dtype, std::move(shape), file_.position(), bytes, crc32c(data, bytes)});
  file_.write(data, bytes);
}

void ArchiveWriter::commit() {
  ADAMANT_CHECK(!committed_, "ArchiveWriter::commit called twice");
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& e : entries_) {
    tensors.push_back({{"name", e.name},
                       {"dtype", std::string(dtype_name(e.dtype))},
                       {"shape", e.shape},
                       {"offset", e.offset},
                       {"bytes", e.bytes},
                       {"crc32c", e.crc}});
  }
  const std::string header = nlohmann::json{{"format", 1}, {"meta", meta_}, {"tensors", tensors}}.dump();
  const std::uint64_t header_bytes = header.size();
  const std::uint32_t header_crc = crc32c(header.data(), header.size());
  file_.write(header.data(), header.size());
  file_.write(&header_bytes, sizeof(header_bytes));
  file_.write(&header_crc, sizeof(header_crc));
  file_.write(kEndMagic, sizeof(kEndMagic));
  file_.commit();
  committed_ = true;
}

ArchiveReader::ArchiveReader(std::filesystem::path path) : path_(std::move(path)), file_(path_, "checkpoint file") {
  const std::string file = path_.string();
  const std::uint64_t size = file_.size();
  const auto damaged = [&](std::string_view what) { fail_damaged(file, what); };
  char magic[8];
  if (size < sizeof(kMagic) + kFooterBytes || !file_.read_at(0, magic, sizeof(magic)) ||
      std::memcmp(magic, kMagic, sizeof(magic)) != 0) {
    damaged("not an Adamant checkpoint: bad leading magic");
  }
  std::array<char, kFooterBytes> footer{};
  if (!file_.read_at(size - kFooterBytes, footer.data(), footer.size()) ||
      std::memcmp(footer.data() + 12, kEndMagic, 8) != 0) {
    damaged("bad trailing magic");
  }
  std::uint64_t header_bytes = 0;
  std::uint32_t header_crc = 0;
  std::memcpy(&header_bytes, footer.data(), 8);
  std::memcpy(&header_crc, footer.data() + 8, 4);
  if (header_bytes > size - kFooterBytes - sizeof(kMagic)) damaged("header size out of range");
  const std::uint64_t data_end = size - kFooterBytes - header_bytes;
  std::string header(header_bytes, '\0');
  if (!file_.read_at(data_end, header.data(), header.size())) damaged("short header");
  if (crc32c(header.data(), header.size()) != header_crc) damaged("header checksum mismatch");
  const auto json = nlohmann::json::parse(header, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("tensors") || !json["tensors"].is_array()) {
    damaged("header is not valid JSON");
  }
  const nlohmann::json& meta = json.contains("meta") ? json["meta"] : nlohmann::json::object();
  if (!meta.is_object()) damaged("its 'meta' is not an object");
  meta_ = meta;
  for (const auto& t : json["tensors"]) {
    ArchiveEntry e;
    e.name = entry_field<std::string>(t, "name", file);
    e.dtype = dtype_from_name(entry_field<std::string>(t, "dtype", file), path_);
    e.shape = entry_field<std::vector<std::int64_t>>(t, "shape", file);
    e.offset = entry_field<std::uint64_t>(t, "offset", file);
    e.bytes = entry_field<std::uint64_t>(t, "bytes", file);
    e.crc = entry_field<std::uint32_t>(t, "crc32c", file);
    if (e.offset > data_end || e.bytes > data_end - e.offset) damaged("a tensor lies outside the file");
    entries_.push_back(std::move(e));
  }
}

bool ArchiveReader::has(const std::string& name) const {
  for (const auto& e : entries_) {
    if (e.name == name) return true;
  }
  return false;
}

const ArchiveEntry& ArchiveReader::entry(const std::string& name) const {
  for (const auto& e : entries_) {
    if (e.name == name) return e;
  }
  fail("checkpoint file {} has no tensor '{}'; it was written for another model or configuration", path_.string(),
       name);
}

void ArchiveReader::read(const std::string& name, void* dst, std::size_t bytes) const {
  const ArchiveEntry& e = entry(name);
  ADAMANT_CHECK(e.bytes == bytes,
                "checkpoint file {}: tensor '{}' holds {} bytes, expected {}; it was written for "
                "another model or configuration",
                path_.string(), name, e.bytes, bytes);
  ADAMANT_CHECK(file_.read_at(e.offset, dst, bytes), "checkpoint file {}: short read of tensor '{}'", path_.string(),
                name);
  const std::uint32_t crc = crc32c(dst, bytes);
  ADAMANT_CHECK(crc == e.crc,
                "checkpoint file {} is damaged: checksum mismatch in tensor '{}' (stored {:08x}, read "
                "{:08x}); use another checkpoint",
                path_.string(), name, e.crc, crc);
}

std::vector<std::uint8_t> ArchiveReader::read_all(const std::string& name) const {
  std::vector<std::uint8_t> out(entry(name).bytes);
  read(name, out.data(), out.size());
  return out;
}

}  // namespace adamant
