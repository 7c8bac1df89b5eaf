#pragma once
// Builds the train/valid/test sample sources of a run from model.data: one
// indexed dataset, or several blended by weight (NeMo's data_prefix
// [w1, prefix1, w2, prefix2, ...]); each dataset is split by splits_string.
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "adamant/data/sample_source.h"

namespace adamant::data {

struct WeightedPrefix {
  double weight = 1.0;
  std::filesystem::path prefix;  // <prefix>.bin / <prefix>.idx

  bool operator==(const WeightedPrefix&) const = default;
};

struct GptDatasetsOptions {
  std::vector<WeightedPrefix> data_prefix;  // model.data.data_prefix; one entry: its weight is ignored
  // The keys' defaults are DataOptions', GptConfig's and TrainerOptions'; the trainer copies them here.
  std::string splits_string;                  // model.data.splits_string
  int seq_length = 0;                         // model.encoder_seq_length
  std::uint32_t seed = 0;                     // model.seed
  std::array<std::int64_t, 3> num_samples{};  // train, valid, test: see megatron_num_samples()
  std::filesystem::path index_cache_dir;      // model.data.index_mapping_dir (GptDatasetOptions)
};

struct GptDatasets {
  // Null where the split has no documents (e.g. splits_string "100,0,0").
  std::shared_ptr<const SampleSource> train, valid, test;
};

// NeMo's sample counts: train max_steps x gbs; valid (max_steps / val_check_interval + 1) x
// limit_val_batches x gbs; test limit_test_batches x gbs.
std::array<std::int64_t, 3> megatron_num_samples(std::int64_t max_steps, std::int64_t val_check_interval,
                                                 std::int64_t limit_val_batches, std::int64_t limit_test_batches,
                                                 std::int64_t global_batch_size);

GptDatasets build_gpt_datasets(const GptDatasetsOptions& options);

}  // namespace adamant::data
