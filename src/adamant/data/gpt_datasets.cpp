#include "adamant/data/gpt_datasets.h"

#include "adamant/core/error.h"
#include "adamant/data/blended_dataset.h"
#include "adamant/data/dataset_split.h"
#include "adamant/data/gpt_dataset.h"
#include "adamant/data/indexed_dataset.h"

namespace adamant::data {
namespace {

constexpr std::array<const char*, 3> kSplitNames{"train", "valid", "test"};

// One prefix split three ways; a split without documents stays null.
std::array<std::shared_ptr<const SampleSource>, 3> build_split_datasets(const std::filesystem::path& prefix,
                                                                        const GptDatasetsOptions& options,
                                                                        const std::array<std::int64_t, 3>& counts) {
  auto indexed = std::make_shared<const IndexedDataset>(IndexedDataset::open(prefix));
  const auto ranges = split_documents(options.splits_string, indexed->num_sequences());
  std::array<std::shared_ptr<const SampleSource>, 3> datasets;
  for (std::size_t split = 0; split < 3; ++split) {
    if (ranges[split].empty()) continue;
    GptDatasetOptions dataset_options;
    dataset_options.name = kSplitNames[split];
    dataset_options.documents = ranges[split];
    dataset_options.seq_length = options.seq_length;
    dataset_options.num_samples = counts[split];
    dataset_options.seed = options.seed;
    dataset_options.index_cache_dir = options.index_cache_dir;
    datasets[split] = std::make_shared<const GptDataset>(indexed, dataset_options);
  }
  return datasets;
}

}  // namespace

std::array<std::int64_t, 3> megatron_num_samples(std::int64_t max_steps, std::int64_t val_check_interval,
                                                 std::int64_t limit_val_batches, std::int64_t limit_test_batches,
                                                 std::int64_t global_batch_size) {
  ADAMANT_CHECK(max_steps > 0, "trainer.max_steps ({}) must be positive", max_steps);
  ADAMANT_CHECK(val_check_interval > 0, "trainer.val_check_interval ({}) must be positive", val_check_interval);
  ADAMANT_CHECK(limit_val_batches >= 0 && limit_test_batches >= 0,
                "trainer.limit_val_batches ({}) and limit_test_batches ({}) must not be negative", limit_val_batches,
                limit_test_batches);
  const std::int64_t eval_batches = (max_steps / val_check_interval + 1) * limit_val_batches;
  return {max_steps * global_batch_size, eval_batches * global_batch_size, limit_test_batches * global_batch_size};
}

GptDatasets build_gpt_datasets(const GptDatasetsOptions& options) {
  ADAMANT_CHECK(!options.data_prefix.empty(),
                "model.data.data_prefix is empty; give a dataset prefix such as "
                "data/moby_dick_text_document (made by adamant preprocess)");
  std::array<std::shared_ptr<const SampleSource>, 3> result;
  if (options.data_prefix.size() == 1) {
    result = build_split_datasets(options.data_prefix.front().prefix, options, options.num_samples);
  } else {
    std::vector<double> weights;
    for (const auto& entry : options.data_prefix) weights.push_back(entry.weight);
    weights = normalize_blend_weights(weights);
    std::array<std::vector<std::shared_ptr<const SampleSource>>, 3> parts;
    std::array<std::vector<double>, 3> part_weights;
    for (std::size_t i = 0; i < options.data_prefix.size(); ++i) {
      std::array<std::int64_t, 3> counts{};
      for (std::size_t split = 0; split < 3; ++split) {
        counts[split] = blended_source_sample_counts(std::span(&weights[i], 1), options.num_samples[split])[0];
      }
      const auto datasets = build_split_datasets(options.data_prefix[i].prefix, options, counts);
      for (std::size_t split = 0; split < 3; ++split) {
        if (datasets[split] == nullptr) continue;
        parts[split].push_back(datasets[split]);
        part_weights[split].push_back(weights[i]);
      }
    }
    for (std::size_t split = 0; split < 3; ++split) {
      if (parts[split].empty()) continue;
      result[split] = std::make_shared<const BlendedDataset>(std::move(parts[split]), part_weights[split],
                                                             options.num_samples[split]);
    }
  }
  return {result[0], result[1], result[2]};
}

}  // namespace adamant::data
