#include "adamant/data/data_options.h"

#include "adamant/data/dataset_split.h"

namespace adamant::data {

void DataOptions::validate(const KeyOrigin& origin) const {
  const OptionChecks check(origin);
  check.at_least("model.micro_batch_size", micro_batch_size, 1, "the samples per rank per micro-batch, e.g. 4");
  check.at_least("model.global_batch_size", global_batch_size, 1, "the samples per optimizer step, e.g. 256");
  check.divisible("model.global_batch_size", global_batch_size, "model.micro_batch_size", micro_batch_size);
  for (std::size_t i = 0; i < data_prefix.size(); ++i) {
    if (data_prefix[i].prefix.empty()) {
      fail(
          "model.data.data_prefix: dataset {} has an empty path prefix{}; give the path of the .bin/.idx pair "
          "without extension",
          i, check.where("model.data.data_prefix"));
    }
    if (!(data_prefix[i].weight > 0.0)) {
      fail(
          "model.data.data_prefix[{}]: blend weight must be > 0 (got {}){}; drop the dataset instead of giving it "
          "weight 0",
          2 * i, data_prefix[i].weight, check.where("model.data.data_prefix"));
    }
  }
  split_weights(splits_string, origin);
  if (tokenizer.library != "megatron" || tokenizer.type != "GPT2BPETokenizer") {
    fail(
        "model.tokenizer: Adamant implements only library 'megatron' with type 'GPT2BPETokenizer' (got '{}' / "
        "'{}'){}; set model.tokenizer.library: megatron and model.tokenizer.type: GPT2BPETokenizer",
        tokenizer.library, tokenizer.type, check.where("model.tokenizer.type"));
  }
}

}  // namespace adamant::data
