#include "adamant/data/data_loader.h"

#include <algorithm>
#include <utility>

#include "adamant/core/error.h"

namespace adamant::data {

DataLoader::DataLoader(std::shared_ptr<const SampleSource> dataset, const DataLoaderOptions& options)
    : dataset_(std::move(dataset)), options_(options) {
  ADAMANT_CHECK(dataset_ != nullptr, "DataLoader: no dataset (is the split empty? check model.data.splits_string)");
  ADAMANT_CHECK(options.global_batch_size > 0 && options.micro_batch_size > 0 && options.dp_size > 0,
                "model.global_batch_size ({}), model.micro_batch_size ({}) and the data-parallel size ({}) must be "
                "positive",
                options.global_batch_size, options.micro_batch_size, options.dp_size);
  ADAMANT_CHECK(options.dp_rank >= 0 && options.dp_rank < options.dp_size,
                "DataLoader: data-parallel rank {} not in [0, {})", options.dp_rank, options.dp_size);
  const int per_micro_step = options.micro_batch_size * options.dp_size;
  ADAMANT_CHECK(options.global_batch_size % per_micro_step == 0,
                "model.global_batch_size ({}) must be divisible by model.micro_batch_size ({}) x data-parallel size "
                "({}) = {}; change one of them",
                options.global_batch_size, options.micro_batch_size, options.dp_size, per_micro_step);
  ADAMANT_CHECK(options.max_steps >= 0, "DataLoader: negative max_steps {}", options.max_steps);
  num_micro_batches_ = options.global_batch_size / per_micro_step;
  seq_length_ = dataset_->seq_length();

  const auto rows = static_cast<std::size_t>(options.micro_batch_size);
  const auto row_tokens = static_cast<std::size_t>(seq_length_);
  sample_buffer_.resize(row_tokens + 1);
  tokens_.resize(rows * row_tokens);
  targets_.resize(rows * row_tokens);
  sample_indices_.resize(rows);
  batch_.micro_batch_size = options.micro_batch_size;
  batch_.seq_length = seq_length_;
  batch_.tokens = tokens_;
  batch_.targets = targets_;
  batch_.sample_indices = sample_indices_;
  reset(options.consumed_samples);
}

void DataLoader::reset(std::int64_t consumed_samples) {
  ADAMANT_CHECK(consumed_samples >= 0 && consumed_samples % options_.global_batch_size == 0,
                "DataLoader: consumed_samples {} must be a non-negative multiple of model.global_batch_size ({}); "
                "resume from a checkpoint taken at a step boundary",
                consumed_samples, options_.global_batch_size);
  consumed_samples_ = consumed_samples;
  steps_yielded_ = 0;
  micro_batch_in_step_ = 0;
}

bool DataLoader::has_next() const {
  if (micro_batch_in_step_ != 0) return true;  // finish the step that has begun
  if (options_.max_steps != 0 && steps_yielded_ >= options_.max_steps) return false;
  return consumed_samples_ + options_.global_batch_size <= dataset_->size();
}

const MicroBatch& DataLoader::next() {
  ADAMANT_CHECK(has_next(),
                "DataLoader: no further global batch after {} consumed samples (the dataset holds {}); build the "
                "dataset for more samples or lower trainer.max_steps",
                consumed_samples_, dataset_->size());
  const std::int64_t first =
      consumed_samples_ + static_cast<std::int64_t>(options_.dp_rank) * options_.micro_batch_size;
  const auto row_tokens = static_cast<std::size_t>(seq_length_);
  for (int row = 0; row < options_.micro_batch_size; ++row) {
    const std::int64_t sample = first + row;
    dataset_->read_sample(sample, sample_buffer_);
    const auto begin = static_cast<std::size_t>(row) * row_tokens;
    std::copy_n(sample_buffer_.begin(), row_tokens, tokens_.begin() + static_cast<std::ptrdiff_t>(begin));
    std::copy_n(sample_buffer_.begin() + 1, row_tokens, targets_.begin() + static_cast<std::ptrdiff_t>(begin));
    sample_indices_[static_cast<std::size_t>(row)] = sample;
  }
  batch_.step = consumed_samples_ / options_.global_batch_size;
  batch_.micro_batch_in_step = micro_batch_in_step_;
  consumed_samples_ += static_cast<std::int64_t>(options_.micro_batch_size) * options_.dp_size;
  if (++micro_batch_in_step_ == num_micro_batches_) {
    micro_batch_in_step_ = 0;
    ++steps_yielded_;
  }
  return batch_;
}

}  // namespace adamant::data
