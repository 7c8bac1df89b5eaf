// Configs that expand without bound: ${...} references that fan out and YAML aliases of
// aliases. References resolve once each (memoised) and what resolution may produce is
// bounded, so such a config ends in an error naming the key instead of running for ever.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "adamant/core/error.h"
#include "adamant/train/train_config.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;

// exp_manager.wandb_logger_kwargs.l0 .. l<levels>, each level `fan_out` references to the one below,
// l0 the text `base`, and exp_manager.name referring to the top level.
std::string fan_out_config(int levels, int fan_out, const std::string& base = "a") {
  std::string yaml = "exp_manager:\n  wandb_logger_kwargs:\n    l0: " + base + "\n";
  for (int level = 1; level <= levels; ++level) {
    yaml += "    l" + std::to_string(level) + ": \"";
    for (int i = 0; i < fan_out; ++i) yaml += "${.l" + std::to_string(level - 1) + "}";
    yaml += "\"\n";
  }
  yaml += "  name: ${exp_manager.wandb_logger_kwargs.l" + std::to_string(levels) + "}\n";
  return yaml;
}

std::string error_of(const std::string& yaml) {
  try {
    parse_train_config(yaml, {}, "bomb.yaml");
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(ConfigBounds, FanOutReferencesResolveOnceEach) {
  // 2^15 = 32768 copies of "a": without memoisation, 65535 resolutions of the levels below.
  const TrainConfig config = parse_train_config(fan_out_config(15, 2), {}, "fan-out.yaml");
  EXPECT_EQ(config.exp_manager.name, std::string(32768, 'a'));
}

TEST(ConfigBounds, ExponentialReferencesAreRefusedNamingTheKey) {
  // 10^12 copies if expanded: refused once the references have produced 100000 values (at l5).
  const std::string many = error_of(fan_out_config(12, 10));
  EXPECT_THAT(many, HasSubstr("exp_manager.wandb_logger_kwargs.l5: the config expands to more than 100000 values"));
  EXPECT_THAT(many, HasSubstr("bomb.yaml"));
  // Few values but long text: 2^12 copies of 16 KiB, refused once a value passes 1 MiB (at l7).
  const std::string long_text = error_of(fan_out_config(12, 2, std::string(16384, 'x')));
  EXPECT_THAT(long_text, HasSubstr("exp_manager.wandb_logger_kwargs.l7: its ${...} references expand to more than "
                                   "1048576 bytes of text"));
}

TEST(ConfigBounds, AliasesOfAliasesAreRefusedNamingTheKey) {
  // A list of 10^9 values when expanded, written in a few hundred bytes.
  std::string yaml =
      "exp_manager:\n  wandb_logger_kwargs:\n    l0: &l0 [\"x\", \"x\", \"x\", \"x\", \"x\", \"x\", "
      "\"x\", \"x\", \"x\", \"x\"]\n";
  for (int level = 1; level <= 8; ++level) {
    const std::string below = "*l" + std::to_string(level - 1);
    yaml += "    l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += below + (i < 9 ? ", " : "");
    yaml += "]\n";
  }
  yaml += "model:\n  data:\n    data_prefix: *l8\n";
  const std::string message = error_of(yaml);
  EXPECT_THAT(message, HasSubstr("model.data.data_prefix"));
  EXPECT_THAT(message, HasSubstr("expands to more than 100000 values"));
  EXPECT_THAT(message, HasSubstr("aliases"));
}

TEST(ConfigBounds, ReferencesOfListsCountEveryUse) {
  // Each level a list of ten references to the level below: memoised, but every use counts.
  std::string yaml = "exp_manager:\n  wandb_logger_kwargs:\n    l0: [1, 2]\n";
  for (int level = 1; level <= 9; ++level) {
    yaml += "    l" + std::to_string(level) + ": [";
    for (int i = 0; i < 10; ++i) yaml += "\"${.l" + std::to_string(level - 1) + "}\"" + (i < 9 ? ", " : "");
    yaml += "]\n";
  }
  yaml += "model:\n  data:\n    data_prefix: ${exp_manager.wandb_logger_kwargs.l9}\n";
  EXPECT_THAT(error_of(yaml), HasSubstr("expands to more than 100000 values"));
}

}  // namespace
}  // namespace adamant::train
