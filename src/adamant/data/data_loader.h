#pragma once
// Data-parallel micro-batches in Megatron's MegatronPretrainingSampler order.
// Samples are numbered by the global order they are consumed in; the global
// batch of a step covers [consumed, consumed + global_batch_size), and micro-batch
// i of that step on data-parallel rank r holds samples
//   consumed + i * micro_batch_size * dp_size + r * micro_batch_size + [0, micro_batch_size).
// Restarting with the consumed_samples of a checkpoint continues the same stream.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "adamant/data/sample_source.h"

namespace adamant::data {

struct DataLoaderOptions {
  int global_batch_size = 0;  // model.global_batch_size (DataOptions holds the key's default)
  int micro_batch_size = 0;   // model.micro_batch_size
  int dp_rank = 0;
  int dp_size = 1;
  std::int64_t consumed_samples = 0;  // where to start; a multiple of global_batch_size
  std::int64_t max_steps = 0;  // global batches to yield at most (e.g. limit_val_batches); 0: until the data ends
};

// Views into the loader's buffers, valid until its next call to next().
struct MicroBatch {
  int micro_batch_size = 0;
  int seq_length = 0;
  std::span<const std::int32_t> tokens;          // [micro_batch_size, seq_length] row-major
  std::span<const std::int32_t> targets;         // [micro_batch_size, seq_length]: tokens shifted by one
  std::span<const std::int64_t> sample_indices;  // global consumption index of each row (dropout RNG counter)
  std::int64_t step = 0;                         // global batch this micro-batch belongs to (from the start)
  int micro_batch_in_step = 0;                   // 0 .. num_micro_batches() - 1
};

class DataLoader {
 public:
  // Throws naming model.global_batch_size / model.micro_batch_size / the data-parallel size when they do not divide.
  DataLoader(std::shared_ptr<const SampleSource> dataset, const DataLoaderOptions& options);

  int num_micro_batches() const { return num_micro_batches_; }
  // Samples consumed by all ranks together; at a step boundary, the value to checkpoint.
  std::int64_t consumed_samples() const { return consumed_samples_; }
  // Whether a whole further global batch is available (data left and max_steps not reached).
  bool has_next() const;
  // The next micro-batch of this rank; never allocates.
  const MicroBatch& next();
  // Starts over from `consumed_samples` (a multiple of global_batch_size), e.g. 0 before each validation.
  void reset(std::int64_t consumed_samples);

 private:
  std::shared_ptr<const SampleSource> dataset_;
  DataLoaderOptions options_;
  int num_micro_batches_ = 0;
  int seq_length_ = 0;
  std::int64_t consumed_samples_ = 0;
  std::int64_t steps_yielded_ = 0;
  int micro_batch_in_step_ = 0;
  std::vector<std::int32_t> sample_buffer_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::int32_t> targets_;
  std::vector<std::int64_t> sample_indices_;
  MicroBatch batch_;
};

}  // namespace adamant::data
