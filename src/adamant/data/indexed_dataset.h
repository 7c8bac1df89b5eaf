#pragma once
// Megatron-LM / NeMo "mmap" indexed dataset: <prefix>.bin holds the raw tokens of
// every sequence back to back; <prefix>.idx describes them (little-endian):
//   "MMIDIDX\0\0" (9 bytes) | u64 version = 1 | u8 dtype code | u64 sequence count N |
//   u64 document-index length D | i32 sizes[N] | i64 byte pointers[N] | i64 doc_idx[D]
// doc_idx starts with 0 and holds, per document, the index of its last sequence + 1.
// Files written here load in Megatron/NeMo and theirs load here.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "adamant/data/mapped_file.h"

namespace adamant::data {

// Megatron's dtype codes. Only the integer types can hold tokens.
enum class TokenDtype : std::uint8_t { u8 = 1, i8 = 2, i16 = 3, i32 = 4, i64 = 5, f64 = 6, f32 = 7, u16 = 8 };

std::size_t token_dtype_size(TokenDtype dtype);
std::string_view token_dtype_name(TokenDtype dtype);
// What Megatron's preprocess_data.py picks: uint16 below 65500 tokens, int32 otherwise.
TokenDtype best_fitting_token_dtype(std::size_t vocab_size);

inline constexpr std::string_view kIndexMagic{"MMIDIDX\0\0", 9};
inline constexpr std::uint64_t kIndexVersion = 1;
inline constexpr std::size_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;

// "<prefix>.idx" and "<prefix>.bin" (appended, so a prefix may contain dots).
std::filesystem::path index_file_path(const std::filesystem::path& prefix);
std::filesystem::path data_file_path(const std::filesystem::path& prefix);

// Reader. Both files are memory-mapped; the (small) index arrays are copied out
// because the header leaves them unaligned. Every field is validated on open.
class IndexedDataset {
 public:
  // Throws adamant::Error naming the file and the defect for a missing, truncated or corrupt dataset.
  static IndexedDataset open(const std::filesystem::path& prefix);

  const std::filesystem::path& prefix() const { return prefix_; }
  TokenDtype dtype() const { return dtype_; }
  std::size_t num_sequences() const { return sizes_.size(); }
  // Documents as the index groups them (doc_idx has one more entry than this).
  std::size_t num_documents() const { return document_index_.size() - 1; }
  std::span<const std::int32_t> sizes() const { return sizes_; }
  std::span<const std::int64_t> pointers() const { return pointers_; }
  std::span<const std::int64_t> document_index() const { return document_index_; }
  std::int64_t num_tokens() const { return num_tokens_; }

  // Copies tokens [offset, offset + out.size()) of `sequence` into `out`; no allocation.
  void read_tokens(std::size_t sequence, std::size_t offset, std::span<std::int32_t> out) const;
  // The whole sequence (allocates; for tools and tests, not for the training loop).
  std::vector<std::int32_t> sequence(std::size_t sequence) const;

 private:
  IndexedDataset() = default;
  std::filesystem::path prefix_;
  TokenDtype dtype_ = TokenDtype::u16;
  std::vector<std::int32_t> sizes_;
  std::vector<std::int64_t> pointers_;
  std::vector<std::int64_t> document_index_;
  std::int64_t num_tokens_ = 0;
  MappedFile data_;
};

// Writer. Tokens stream into "<prefix>.bin.tmp"; finalize() writes "<prefix>.idx.tmp"
// and renames both into place, so readers never see a half-written dataset. A
// builder destroyed without finalize() removes its temporary files.
class IndexedDatasetBuilder {
 public:
  IndexedDatasetBuilder(std::filesystem::path prefix, TokenDtype dtype);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // Appends one sequence; a token that does not fit the dtype throws.
  void add_sequence(std::span<const std::int32_t> tokens);
  // Closes the current document (the sequences added since the last call).
  void end_document();
  // add_sequence + end_document: the usual one-sequence-per-document layout.
  void add_document(std::span<const std::int32_t> tokens);
  void finalize();

  std::size_t num_sequences() const { return sizes_.size(); }
  std::int64_t num_tokens() const { return num_tokens_; }

 private:
  struct Output;
  std::filesystem::path prefix_;
  TokenDtype dtype_;
  std::unique_ptr<Output> output_;
  std::vector<std::int32_t> sizes_;
  std::vector<std::int64_t> document_index_{0};
  std::vector<std::byte> staging_;
  std::int64_t num_tokens_ = 0;
  bool finalized_ = false;
};

}  // namespace adamant::data
