#pragma once
// The data keys of a training run with NeMo's defaults: the batch sizes, the
// datasets (model.data) and the tokenizer (model.tokenizer). validate() names the
// key of any bad value; the training config maps its YAML paths onto these fields.
#include <filesystem>
#include <string>
#include <vector>

#include "adamant/core/option_checks.h"
#include "adamant/data/gpt_datasets.h"

namespace adamant::data {

struct TokenizerOptions {            // model.tokenizer
  std::string library = "megatron";  // the only one: Megatron's GPT-2 BPE
  std::string type = "GPT2BPETokenizer";
  // Relative to the working folder: where scripts/fetch_data.sh puts GPT-2's files.
  std::filesystem::path vocab_file = ".cache/data/gpt2/encoder.json";
  std::filesystem::path merge_file = ".cache/data/gpt2/vocab.bpe";

  bool operator==(const TokenizerOptions&) const = default;
};

struct DataOptions {
  int micro_batch_size = 4;   // model.micro_batch_size: samples per rank per micro-batch
  int global_batch_size = 8;  // model.global_batch_size: samples per optimizer step
  // model.data.data_prefix: the Megatron datasets (.bin/.idx without extension) and their blend weights.
  std::vector<WeightedPrefix> data_prefix;
  std::string splits_string = "969,30,1";   // model.data.splits_string: train, validation, test weights
  std::filesystem::path index_mapping_dir;  // model.data.index_mapping_dir; empty: index arrays in memory
  TokenizerOptions tokenizer;

  bool operator==(const DataOptions&) const = default;

  // Throws adamant::Error naming the key and the fix; `origin` says where a key's value came from.
  void validate(const KeyOrigin& origin = {}) const;
};

}  // namespace adamant::data
