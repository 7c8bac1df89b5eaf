// Fuzzes the training-config reader (YAML, overrides' value syntax, ${...} interpolation,
// NeMo keys): any input either parses or throws adamant::Error; a crash, a sanitizer report, a
// hang or another exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "adamant/core/error.h"
#include "adamant/train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const adamant::train::TrainConfig config = adamant::train::parse_train_config(text, {}, "fuzz.yaml");
    (void)adamant::train::to_yaml(config);
  } catch (const adamant::Error&) {
  }
  return 0;
}
