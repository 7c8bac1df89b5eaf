#pragma once
// A step's micro-batches, copied out of the data loader (whose views last only until its next
// call) into storage kept from step to step, so that a pipeline schedule can run them in any
// order; each is checked against the tokenizer's vocabulary on the way.
#include <filesystem>
#include <span>
#include <vector>

#include "adamant/data/data_loader.h"
#include "adamant/model/gpt_model.h"

namespace adamant::train {

class StepBatches {
 public:
  // data_files: the datasets, named in the error for a token id outside the vocabulary.
  StepBatches(int vocab_size, std::vector<std::filesystem::path> data_files);

  // The loader's next num_micro_batches() micro-batches, valid until the next call.
  std::span<const model::MicroBatch> next(data::DataLoader& loader);

 private:
  struct Stored {
    std::vector<std::int32_t> tokens, targets;
  };
  void check_token_range(const data::MicroBatch& batch) const;

  int vocab_size_;
  std::vector<std::filesystem::path> data_files_;
  std::vector<Stored> stored_;
  std::vector<model::MicroBatch> views_;
};

}  // namespace adamant::train
