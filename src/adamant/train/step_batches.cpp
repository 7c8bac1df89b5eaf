#include "adamant/train/step_batches.h"

#include <algorithm>
#include <string>

#include "adamant/core/error.h"
#include "adamant/train/run_setup.h"

namespace adamant::train {

StepBatches::StepBatches(int vocab_size, std::vector<std::filesystem::path> data_files)
    : vocab_size_(vocab_size), data_files_(std::move(data_files)) {}

std::span<const model::MicroBatch> StepBatches::next(data::DataLoader& loader) {
  stored_.resize(static_cast<std::size_t>(loader.num_micro_batches()));
  views_.resize(stored_.size());
  for (std::size_t i = 0; i < stored_.size(); ++i) {
    const data::MicroBatch& batch = loader.next();
    check_token_range(batch);
    Stored& stored = stored_[i];
    stored.tokens.assign(batch.tokens.begin(), batch.tokens.end());  // same size every step: no allocation
    stored.targets.assign(batch.targets.begin(), batch.targets.end());
    views_[i] = to_model_batch(batch);
    views_[i].tokens = stored.tokens;
    views_[i].targets = stored.targets;
  }
  return views_;
}

// Token ids at or above the vocabulary mean the data was tokenized with another vocabulary.
void StepBatches::check_token_range(const data::MicroBatch& batch) const {
  const auto [lo, hi] = std::minmax_element(batch.tokens.begin(), batch.tokens.end());
  const auto [tlo, thi] = std::minmax_element(batch.targets.begin(), batch.targets.end());
  const std::int32_t max_id = std::max(*hi, *thi);
  const std::int32_t min_id = std::min(*lo, *tlo);
  if (max_id >= vocab_size_ || min_id < 0) {
    std::string files;
    for (const auto& f : data_files_) files += (files.empty() ? "" : ", ") + f.string();
    fail(
        "the data ({}) holds token id {}, outside the tokenizer's vocabulary of {} tokens: it was preprocessed with "
        "another tokenizer; re-run `adamant preprocess` with the vocabulary in model.tokenizer",
        files, max_id >= vocab_size_ ? max_id : min_id, vocab_size_);
  }
}

}  // namespace adamant::train
