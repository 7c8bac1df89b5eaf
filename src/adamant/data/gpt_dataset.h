#pragma once
// Megatron's GPTDataset: the documents of one split, repeated for as many epochs
// as the requested sample count needs, shuffled per epoch (doc_idx), cut into
// samples of seq_length + 1 tokens that run across document boundaries
// (sample_idx; consecutive samples share one token, the next sample's first
// input being the previous one's last target), and served in shuffled order
// (shuffle_idx). The seeded shuffles are numpy's (see shuffle.h), so for the same
// data, split, seq_length, sample count and seed the sample order equals
// Megatron-LM's/NeMo's. Memory is O(documents x epochs + samples).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "adamant/data/dataset_split.h"
#include "adamant/data/index_cache.h"
#include "adamant/data/indexed_dataset.h"
#include "adamant/data/sample_source.h"

namespace adamant::data {

struct GptDatasetOptions {
  std::string name = "train";  // for messages
  DocumentRange documents;     // sequences of the indexed dataset in this split
  int seq_length = 2048;
  std::int64_t num_samples = 0;  // requested; the dataset holds at least this many
  std::uint32_t seed = 1234;
  // model.data.index_mapping_dir: when set, the index arrays are read from a file there
  // (index_cache.h), or built and saved there for the next rank or run.
  std::filesystem::path index_cache_dir;
};

class GptDataset final : public SampleSource {
 public:
  // The most memory the index arrays may take; beyond it construction fails with a clear error.
  static constexpr double kMaxIndexBytes = 8.0 * 1024 * 1024 * 1024;

  GptDataset(std::shared_ptr<const IndexedDataset> data, const GptDatasetOptions& options);

  std::int64_t size() const override { return static_cast<std::int64_t>(sample_starts_.size()) - 1; }
  int seq_length() const override { return seq_length_; }
  void read_sample(std::int64_t index, std::span<std::int32_t> out) const override;

  int num_epochs() const { return num_epochs_; }
  std::int64_t tokens_per_epoch() const { return tokens_per_epoch_; }
  // The three index arrays, exposed for tests and diagnostics.
  std::span<const std::int32_t> document_order() const { return document_order_; }
  std::span<const SampleStart> sample_starts() const { return sample_starts_; }
  std::span<const std::int64_t> shuffle_order() const { return shuffle_order_; }
  bool loaded_from_cache() const { return mapped_.size() > 0; }

 private:
  // Builds the arrays in owned_* (Megatron's algorithm) and points the views at them.
  void build(const GptDatasetOptions& options);

  std::shared_ptr<const IndexedDataset> data_;
  std::string name_;
  DocumentRange documents_;
  int seq_length_;
  int num_epochs_ = 0;
  std::int64_t tokens_per_epoch_ = 0;
  // Views of the arrays: into owned_* when built here, into mapped_ when read from the cache.
  std::span<const std::int32_t> document_order_;
  std::span<const SampleStart> sample_starts_;
  std::span<const std::int64_t> shuffle_order_;
  std::vector<std::int32_t> owned_document_order_;
  std::vector<SampleStart> owned_sample_starts_;
  std::vector<std::int64_t> owned_shuffle_order_;
  MappedFile mapped_;
};

}  // namespace adamant::data
