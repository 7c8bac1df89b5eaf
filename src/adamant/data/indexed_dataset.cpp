#include "adamant/data/indexed_dataset.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "adamant/core/error.h"
#include "adamant/core/file_write.h"

namespace adamant::data {

static_assert(std::endian::native == std::endian::little, "the .idx/.bin layout is little-endian");

namespace {

constexpr std::string_view kFix = "re-run adamant preprocess to rebuild the dataset";

bool is_integer_dtype(TokenDtype dtype) { return dtype != TokenDtype::f32 && dtype != TokenDtype::f64; }

bool is_known_dtype_code(std::uint8_t code) { return code >= 1 && code <= 8; }

template <typename T>
T load(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

template <typename Stored>
void convert_tokens(const std::byte* source, std::span<std::int32_t> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::int32_t>(load<Stored>(source + i * sizeof(Stored)));
  }
}

template <typename Stored>
void store_tokens(std::span<const std::int32_t> tokens, std::byte* destination, TokenDtype dtype,
                  const std::filesystem::path& prefix) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int64_t token = tokens[i];
    if (token < static_cast<std::int64_t>(std::numeric_limits<Stored>::min()) ||
        token > static_cast<std::int64_t>(std::numeric_limits<Stored>::max())) {
      fail("indexed dataset {}: token {} does not fit dtype {}; write it with a wider dtype (int32)", prefix.string(),
           token, token_dtype_name(dtype));
    }
    const auto stored = static_cast<Stored>(token);
    std::memcpy(destination + i * sizeof(Stored), &stored, sizeof(Stored));
  }
}

template <typename T>
void read_array(const std::byte* at, std::vector<T>& out, std::size_t count) {
  out.resize(count);
  if (count != 0) std::memcpy(out.data(), at, count * sizeof(T));
}

}  // namespace

std::size_t token_dtype_size(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::u8:
    case TokenDtype::i8:
      return 1;
    case TokenDtype::i16:
    case TokenDtype::u16:
      return 2;
    case TokenDtype::i32:
    case TokenDtype::f32:
      return 4;
    case TokenDtype::i64:
    case TokenDtype::f64:
      return 8;
  }
  fail("unknown token dtype code {}", static_cast<int>(dtype));
}

std::string_view token_dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::u8:
      return "uint8";
    case TokenDtype::i8:
      return "int8";
    case TokenDtype::i16:
      return "int16";
    case TokenDtype::i32:
      return "int32";
    case TokenDtype::i64:
      return "int64";
    case TokenDtype::f64:
      return "float64";
    case TokenDtype::f32:
      return "float32";
    case TokenDtype::u16:
      return "uint16";
  }
  return "unknown";
}

TokenDtype best_fitting_token_dtype(std::size_t vocab_size) {
  return vocab_size < 65500 ? TokenDtype::u16 : TokenDtype::i32;
}

std::filesystem::path index_file_path(const std::filesystem::path& prefix) {
  return std::filesystem::path(prefix.string() + ".idx");
}

std::filesystem::path data_file_path(const std::filesystem::path& prefix) {
  return std::filesystem::path(prefix.string() + ".bin");
}

IndexedDataset IndexedDataset::open(const std::filesystem::path& prefix) {
  const auto idx_path = index_file_path(prefix);
  const auto bin_path = data_file_path(prefix);
  const MappedFile index = MappedFile::open(idx_path);
  const auto bytes = index.bytes();
  const std::string idx_name = idx_path.string();

  ADAMANT_CHECK(bytes.size() >= kIndexHeaderBytes,
                "index file {} is truncated: {} bytes, the header alone needs {}; {}", idx_name, bytes.size(),
                kIndexHeaderBytes, kFix);
  const std::string_view magic(reinterpret_cast<const char*>(bytes.data()), kIndexMagic.size());
  ADAMANT_CHECK(magic == kIndexMagic,
                "index file {} does not start with the Megatron mmap magic \"MMIDIDX\\0\\0\" (not an mmap indexed "
                "dataset, or corrupt); {}",
                idx_name, kFix);
  const std::byte* cursor = bytes.data() + kIndexMagic.size();
  const auto version = load<std::uint64_t>(cursor);
  cursor += 8;
  ADAMANT_CHECK(version == kIndexVersion, "index file {} has version {}, only version {} is supported; {}", idx_name,
                version, kIndexVersion, kFix);
  const auto dtype_code = load<std::uint8_t>(cursor);
  cursor += 1;
  ADAMANT_CHECK(is_known_dtype_code(dtype_code), "index file {} has unknown dtype code {} (valid: 1..8); {}", idx_name,
                static_cast<int>(dtype_code), kFix);
  const auto dtype = static_cast<TokenDtype>(dtype_code);
  ADAMANT_CHECK(is_integer_dtype(dtype), "index file {} stores {} values, but tokens must be integers; {}", idx_name,
                token_dtype_name(dtype), kFix);
  const auto num_sequences = load<std::uint64_t>(cursor);
  cursor += 8;
  const auto doc_index_length = load<std::uint64_t>(cursor);
  cursor += 8;

  // Bound the counts by the file size before multiplying, so a corrupt count cannot overflow.
  const std::uint64_t body = bytes.size() - kIndexHeaderBytes;
  ADAMANT_CHECK(num_sequences <= body / 12 && doc_index_length <= body / 8,
                "index file {} is truncated or corrupt: it declares {} sequences and {} document-index entries but "
                "holds only {} bytes after the header; {}",
                idx_name, num_sequences, doc_index_length, body, kFix);
  const std::uint64_t expected = 12 * num_sequences + 8 * doc_index_length;
  // Megatron's multimodal variant appends one mode byte per sequence; anything else is damage.
  ADAMANT_CHECK(body == expected || body == expected + num_sequences,
                "index file {} has {} bytes after the header but {} sequences and {} document-index entries need {} "
                "(truncated or corrupt); {}",
                idx_name, body, num_sequences, doc_index_length, expected, kFix);
  ADAMANT_CHECK(doc_index_length >= 1, "index file {} has an empty document index (it must start with 0); {}", idx_name,
                kFix);

  IndexedDataset dataset;
  dataset.prefix_ = prefix;
  dataset.dtype_ = dtype;
  read_array(cursor, dataset.sizes_, num_sequences);
  cursor += 4 * num_sequences;
  read_array(cursor, dataset.pointers_, num_sequences);
  cursor += 8 * num_sequences;
  read_array(cursor, dataset.document_index_, doc_index_length);

  const auto& doc_index = dataset.document_index_;
  ADAMANT_CHECK(doc_index.front() == 0, "index file {}: document index starts with {} instead of 0; {}", idx_name,
                doc_index.front(), kFix);
  for (std::size_t d = 1; d < doc_index.size(); ++d) {
    ADAMANT_CHECK(doc_index[d] >= doc_index[d - 1] && doc_index[d] <= static_cast<std::int64_t>(num_sequences),
                  "index file {}: document index entry {} = {} is not monotone within [0, {}]; {}", idx_name, d,
                  doc_index[d], num_sequences, kFix);
  }

  dataset.data_ = MappedFile::open(bin_path);
  const auto data_bytes = static_cast<std::int64_t>(dataset.data_.size());
  const auto element = static_cast<std::int64_t>(token_dtype_size(dtype));
  // Sequences lie back to back in the .bin (as Megatron writes them): each pointer is where the
  // one before ends, and the last ends at the file's end. A damaged size, a dtype byte that does
  // not match the data, or a .bin of another .idx breaks this chain.
  std::int64_t end = 0;
  for (std::size_t i = 0; i < num_sequences; ++i) {
    const std::int64_t size = dataset.sizes_[i];
    const std::int64_t pointer = dataset.pointers_[i];
    ADAMANT_CHECK(size >= 0, "index file {}: sequence {} has negative size {}; {}", idx_name, i, size, kFix);
    ADAMANT_CHECK(pointer == end,
                  "index file {} is corrupt: sequence {} starts at byte {} of {}, but the sequences before it end at "
                  "byte {} ({} tokens of {} bytes each): a damaged sequence size, or a dtype byte ({}) that does not "
                  "match the data; {}",
                  idx_name, i, pointer, bin_path.string(), end, dataset.num_tokens_, element, token_dtype_name(dtype),
                  kFix);
    ADAMANT_CHECK(pointer <= data_bytes && size <= (data_bytes - pointer) / element,
                  "data file {} is truncated or does not match {}: sequence {} spans bytes [{}, {}) but the file has "
                  "{} bytes; {}",
                  bin_path.string(), idx_name, i, pointer, pointer + size * element, data_bytes, kFix);
    end = pointer + size * element;
    dataset.num_tokens_ += size;
  }
  ADAMANT_CHECK(end == data_bytes,
                "data file {} has {} bytes, but {} describes {} tokens of {} ({} bytes): the files do not belong "
                "together, or the dtype byte is wrong; {}",
                bin_path.string(), data_bytes, idx_name, dataset.num_tokens_, token_dtype_name(dtype), end, kFix);
  return dataset;
}

void IndexedDataset::read_tokens(std::size_t sequence, std::size_t offset, std::span<std::int32_t> out) const {
  ADAMANT_CHECK(sequence < sizes_.size(), "indexed dataset {}: sequence {} out of range (it has {})", prefix_.string(),
                sequence, sizes_.size());
  ADAMANT_CHECK(offset + out.size() <= static_cast<std::size_t>(sizes_[sequence]),
                "indexed dataset {}: tokens [{}, {}) of sequence {} requested, it has {}", prefix_.string(), offset,
                offset + out.size(), sequence, sizes_[sequence]);
  const std::size_t element = token_dtype_size(dtype_);
  const std::byte* source = data_.bytes().data() + pointers_[sequence] + offset * element;
  switch (dtype_) {
    case TokenDtype::u8:
      return convert_tokens<std::uint8_t>(source, out);
    case TokenDtype::i8:
      return convert_tokens<std::int8_t>(source, out);
    case TokenDtype::i16:
      return convert_tokens<std::int16_t>(source, out);
    case TokenDtype::u16:
      return convert_tokens<std::uint16_t>(source, out);
    case TokenDtype::i32:
      return convert_tokens<std::int32_t>(source, out);
    case TokenDtype::i64:
      for (std::size_t i = 0; i < out.size(); ++i) {
        const auto token = load<std::int64_t>(source + i * 8);
        ADAMANT_CHECK(
            token >= std::numeric_limits<std::int32_t>::min() && token <= std::numeric_limits<std::int32_t>::max(),
            "data file {}: token {} does not fit int32", data_file_path(prefix_).string(), token);
        out[i] = static_cast<std::int32_t>(token);
      }
      return;
    case TokenDtype::f32:
    case TokenDtype::f64:
      break;
  }
  fail("indexed dataset {}: cannot read tokens of dtype {}", prefix_.string(), token_dtype_name(dtype_));
}

std::vector<std::int32_t> IndexedDataset::sequence(std::size_t sequence) const {
  ADAMANT_CHECK(sequence < sizes_.size(), "indexed dataset {}: sequence {} out of range (it has {})", prefix_.string(),
                sequence, sizes_.size());
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(sizes_[sequence]));
  read_tokens(sequence, 0, tokens);
  return tokens;
}

// ---------------------------------------------------------------------------------------------

struct IndexedDatasetBuilder::Output {
  std::filesystem::path bin_temp;
  std::filesystem::path idx_temp;
  std::ofstream bin;
};

namespace {

std::filesystem::path temp_path(const std::filesystem::path& path) {
  return std::filesystem::path(path.string() + ".tmp");
}

void check_stream(const std::ofstream& stream, const std::filesystem::path& path) {
  ADAMANT_CHECK(stream.good(), "cannot write {}: the disk may be full or the folder not writable", path.string());
}

template <typename T>
void write_value(std::ofstream& stream, const T& value) {
  stream.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

IndexedDatasetBuilder::IndexedDatasetBuilder(std::filesystem::path prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype), output_(std::make_unique<Output>()) {
  ADAMANT_CHECK(is_integer_dtype(dtype), "indexed dataset {}: tokens need an integer dtype, not {}", prefix_.string(),
                token_dtype_name(dtype));
  output_->bin_temp = temp_path(data_file_path(prefix_));
  output_->idx_temp = temp_path(index_file_path(prefix_));
  if (prefix_.has_parent_path()) create_folder(prefix_.parent_path(), "output (--output-prefix)");
  output_->bin.open(output_->bin_temp, std::ios::binary | std::ios::trunc);
  ADAMANT_CHECK(output_->bin.is_open(), "cannot create {}: check that the folder exists and is writable",
                output_->bin_temp.string());
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (finalized_) return;
  output_->bin.close();
  std::error_code ignored;
  std::filesystem::remove(output_->bin_temp, ignored);
  std::filesystem::remove(output_->idx_temp, ignored);
}

void IndexedDatasetBuilder::add_sequence(std::span<const std::int32_t> tokens) {
  ADAMANT_CHECK(!finalized_, "indexed dataset {}: add_sequence after finalize", prefix_.string());
  ADAMANT_CHECK(tokens.size() <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
                "indexed dataset {}: a sequence of {} tokens exceeds the format's int32 size field", prefix_.string(),
                tokens.size());
  staging_.resize(tokens.size() * token_dtype_size(dtype_));
  switch (dtype_) {
    case TokenDtype::u8:
      store_tokens<std::uint8_t>(tokens, staging_.data(), dtype_, prefix_);
      break;
    case TokenDtype::i8:
      store_tokens<std::int8_t>(tokens, staging_.data(), dtype_, prefix_);
      break;
    case TokenDtype::i16:
      store_tokens<std::int16_t>(tokens, staging_.data(), dtype_, prefix_);
      break;
    case TokenDtype::u16:
      store_tokens<std::uint16_t>(tokens, staging_.data(), dtype_, prefix_);
      break;
    case TokenDtype::i32:
      store_tokens<std::int32_t>(tokens, staging_.data(), dtype_, prefix_);
      break;
    case TokenDtype::i64:
      store_tokens<std::int64_t>(tokens, staging_.data(), dtype_, prefix_);
      break;
    case TokenDtype::f32:
    case TokenDtype::f64:
      fail("indexed dataset {}: float dtypes cannot hold tokens", prefix_.string());
  }
  output_->bin.write(reinterpret_cast<const char*>(staging_.data()), static_cast<std::streamsize>(staging_.size()));
  check_stream(output_->bin, output_->bin_temp);
  sizes_.push_back(static_cast<std::int32_t>(tokens.size()));
  num_tokens_ += static_cast<std::int64_t>(tokens.size());
}

void IndexedDatasetBuilder::end_document() { document_index_.push_back(static_cast<std::int64_t>(sizes_.size())); }

void IndexedDatasetBuilder::add_document(std::span<const std::int32_t> tokens) {
  add_sequence(tokens);
  end_document();
}

void IndexedDatasetBuilder::finalize() {
  ADAMANT_CHECK(!finalized_, "indexed dataset {}: finalize called twice", prefix_.string());
  output_->bin.close();
  check_stream(output_->bin, output_->bin_temp);

  std::ofstream idx(output_->idx_temp, std::ios::binary | std::ios::trunc);
  ADAMANT_CHECK(idx.is_open(), "cannot create {}", output_->idx_temp.string());
  idx.write(kIndexMagic.data(), static_cast<std::streamsize>(kIndexMagic.size()));
  write_value(idx, kIndexVersion);
  write_value(idx, static_cast<std::uint8_t>(dtype_));
  write_value(idx, static_cast<std::uint64_t>(sizes_.size()));
  write_value(idx, static_cast<std::uint64_t>(document_index_.size()));
  idx.write(reinterpret_cast<const char*>(sizes_.data()), static_cast<std::streamsize>(sizes_.size() * 4));
  const auto element = static_cast<std::int64_t>(token_dtype_size(dtype_));
  std::int64_t pointer = 0;
  for (const std::int32_t size : sizes_) {
    write_value(idx, pointer);
    pointer += size * element;
  }
  idx.write(reinterpret_cast<const char*>(document_index_.data()),
            static_cast<std::streamsize>(document_index_.size() * 8));
  idx.close();
  check_stream(idx, output_->idx_temp);

  // .bin first: a reader that sees the new .idx then also sees its .bin.
  rename_into_place(output_->bin_temp, data_file_path(prefix_));
  rename_into_place(output_->idx_temp, index_file_path(prefix_));
  finalized_ = true;
}

}  // namespace adamant::data
