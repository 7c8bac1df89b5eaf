#pragma once
// A GptDataset's index arrays (document order, sample starts, shuffle order) saved
// once and then mapped read-only (model.data.index_mapping_dir, as in NeMo): a run's
// ranks and later runs skip rebuilding them, and the ranks of a machine share one
// copy in the page cache instead of holding one each, which for a large corpus is
// several GB per rank.
//
// File: "ADIDXv01" | header (the key below, the array lengths, the epoch count and
// tokens per epoch) | CRC32C of the header | the three arrays, 8-byte aligned | CRC32C
// of the arrays. Written to a temporary name and renamed, so a reader sees a whole
// file or none. A file whose key, length or checksums do not match is not used (the
// caller rebuilds and rewrites it).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "adamant/data/dataset_split.h"
#include "adamant/data/mapped_file.h"

namespace adamant::data {

struct SampleStart {  // where a sample starts: position in the document order and token offset in that document
  std::int64_t document_position = 0;
  std::int32_t offset = 0;
  // Named padding, always zero: the struct is written to index cache files as is, and
  // compiler padding would carry whatever bytes happened to be in memory.
  std::int32_t reserved = 0;
};
static_assert(sizeof(SampleStart) == 16, "SampleStart has no unnamed padding");

// What the arrays are a function of.
struct GptIndexKey {
  std::string split;  // "train", "valid", "test"
  DocumentRange documents;
  int seq_length = 0;
  std::int64_t num_samples = 0;
  std::uint32_t seed = 0;
  std::uint32_t sizes_checksum = 0;  // CRC32C of the documents' token counts: the data itself
};

struct GptIndexArrays {
  std::span<const std::int32_t> document_order;
  std::span<const SampleStart> sample_starts;
  std::span<const std::int64_t> shuffle_order;
  int num_epochs = 0;
  std::int64_t tokens_per_epoch = 0;
};

// <dir>/<data file name>_<split>_indexmap_<samples>ns_<seq>sl_<seed>s_<first>-<end>d.adidx
std::filesystem::path index_cache_file(const std::filesystem::path& dir, const std::filesystem::path& data_prefix,
                                       const GptIndexKey& key);

// Writes `arrays` for `key` (atomically). Throws adamant::Error naming the file if it cannot.
void write_index_cache(const std::filesystem::path& file, const GptIndexKey& key, const GptIndexArrays& arrays);

// The mapped file and its arrays (views into the mapping), or nothing when the file is
// absent, damaged or made for another key.
struct MappedIndex {
  MappedFile file;
  GptIndexArrays arrays;
};
std::optional<MappedIndex> open_index_cache(const std::filesystem::path& file, const GptIndexKey& key);

}  // namespace adamant::data
