// The training config as a map onto the layers' option structs: the defaults are the
// structs' own, every key reads back what it writes, docs/config.md lists every key with
// its default, and the NeMo launch keys (trainer.devices, num_nodes) and
// model.optim.contiguous_grad_buffer are honoured or refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "adamant/core/error.h"
#include "adamant/core/file_read.h"
#include "adamant/train/config_schema.h"
#include "adamant/train/train_config.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_train_config(yaml, overrides, "test.yaml");
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(ConfigLayers, AnEmptyFileGivesTheStructsDefaults) {
  // Nothing in the parser sets a default of its own: the structs' values are the config's.
  EXPECT_EQ(parse_train_config("", {}), TrainConfig{});
  EXPECT_EQ(TrainConfig{}.optim, optim::OptimizerOptions{});
  EXPECT_EQ(TrainConfig{}.model, model::GptConfig{});
  EXPECT_EQ(TrainConfig{}.data, data::DataOptions{});
}

TEST(ConfigLayers, EveryKeyReadsBackWhatItWrites) {
  const TrainConfig defaults = parse_train_config("", {});
  for (const auto& field : detail::config_fields()) {
    SCOPED_TRACE(field.path);
    const std::string text = field.write(defaults);
    EXPECT_EQ(parse_train_config("", {field.path + "=" + text}), defaults) << text;
  }
}

TEST(ConfigLayers, DocsListEveryKeyWithItsDefault) {
  const std::string docs = read_text_file(std::string(ADAMANT_DOCS_DIR) + "/config.md", "docs/config.md");
  const std::string begin = "<!-- config-keys:begin -->\n", end = "<!-- config-keys:end -->";
  const std::size_t from = docs.find(begin), to = docs.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/config.md lacks " << begin;
  ASSERT_NE(to, std::string::npos) << "docs/config.md lacks " << end;
  EXPECT_EQ(docs.substr(from + begin.size(), to - from - begin.size()), config_keys_markdown())
      << "docs/config.md's key table is out of date: replace it by the output of `adamant config-keys`";
  // Spot checks of the generated rows against the structs.
  EXPECT_THAT(config_keys_markdown(), HasSubstr("| `model.optim.bucket_cap_mb` | `100.0` |"));
  EXPECT_THAT(config_keys_markdown(), HasSubstr("| `trainer.devices` | `-1` |"));
  EXPECT_THAT(config_keys_markdown(), HasSubstr("| `model.ffn_hidden_size` | 4 x `model.hidden_size` |"));
}

TEST(ConfigLayers, DevicesTakeACountOrAuto) {
  EXPECT_EQ(parse_train_config("trainer:\n  devices: auto\n", {}).trainer.devices, TrainerOptions::kAutoDevices);
  EXPECT_EQ(parse_train_config("trainer:\n  devices: -1\n  num_nodes: 4\n", {}).trainer.devices, -1);
  const TrainConfig eight = parse_train_config("trainer:\n  devices: 8\n  num_nodes: 2\n", {});
  EXPECT_EQ(eight.trainer.devices, 8);
  EXPECT_EQ(eight.trainer.num_nodes, 2);
  EXPECT_THAT(
      error_of("trainer:\n  devices: [0, 1]\n"),
      HasSubstr("trainer.devices is a list [0, 1]: a list of device ids is not supported (in test.yaml, line 2)"));
  EXPECT_THAT(error_of("trainer:\n  devices: \"0,1\"\n"), HasSubstr("a list of device ids is not supported"));
  EXPECT_THAT(error_of("trainer:\n  devices: 0\n"),
              HasSubstr("trainer.devices must be >= 1 or -1 (got 0) (in test.yaml, line 2)"));
  EXPECT_THAT(error_of("trainer:\n  num_nodes: 0\n"), HasSubstr("trainer.num_nodes must be >= 1 (got 0)"));
}

TEST(ConfigLayers, ContiguousGradBufferIsAlwaysOn) {
  const TrainConfig config = parse_train_config("model:\n  optim:\n    contiguous_grad_buffer: true\n", {});
  EXPECT_THAT(config.ignored_keys, ::testing::Contains("model.optim.contiguous_grad_buffer"));
  EXPECT_THAT(error_of("model:\n  optim:\n    contiguous_grad_buffer: false\n"),
              HasSubstr("model.optim.contiguous_grad_buffer: a gradient buffer per parameter (Adamant's gradients "
                        "are always one contiguous buffer) is not supported by Adamant (got 'false') (in test.yaml, "
                        "line 3); set it to true or remove the key"));
}

TEST(ConfigLayers, EachLayerNamesItsKeysWithoutTheParser) {
  auto message = [](const auto& validate) {
    try {
      validate();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  optim::OptimizerOptions optimizer;
  EXPECT_EQ(message([&] { optimizer.validate(); }), "");
  optimizer.bucket_cap_mb = -1;
  EXPECT_EQ(message([&] { optimizer.validate(); }),
            "model.optim.bucket_cap_mb must be > 0 (got -1); it is the bucket size in MiB, e.g. 100");
  data::DataOptions data;
  data.splits_string = "1,2,3,4";
  EXPECT_THAT(message([&] { data.validate(); }), HasSubstr("model.data.splits_string: '1,2,3,4' is not a"));
  model::GptConfig gpt;
  gpt.hidden_dropout = 1.5f;
  EXPECT_THAT(message([&] { gpt.validate(); }), HasSubstr("model.hidden_dropout must be in [0, 1) (got 1.5); it is"));
  TrainerOptions trainer;
  trainer.seed = -1;
  EXPECT_THAT(message([&] { trainer.validate(); }), HasSubstr("model.seed=-1 is out of range"));
  // Through the parser the same checks say where the value came from.
  EXPECT_THAT(
      error_of("", {"model.optim.bucket_cap_mb=-1"}),
      HasSubstr("model.optim.bucket_cap_mb must be > 0 (got -1) (from override 'model.optim.bucket_cap_mb=-1')"));
  EXPECT_THAT(error_of("model:\n  optim:\n    name: distributed_fused_adam\n"), HasSubstr("(in test.yaml, line 3)"));
}

}  // namespace
}  // namespace adamant::train
