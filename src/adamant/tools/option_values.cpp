#include "adamant/tools/option_values.h"

#include <optional>

#include "adamant/core/error.h"
#include "adamant/core/number_text.h"

namespace adamant::tools {

int parse_int_option(const char* option, const std::string& text, int low, int high) {
  const std::optional<long long> value = number_from_text<long long>(text);
  ADAMANT_CHECK(value && *value >= low && *value <= high, "{} {}: give a whole number in [{}, {}]", option, text, low,
                high);
  return static_cast<int>(*value);
}

float parse_float_option(const char* option, const std::string& text, double low, double high) {
  const std::optional<double> value = number_from_text<double>(text);
  ADAMANT_CHECK(value && *value >= low && *value <= high, "{} {}: give a finite number in [{}, {}]", option, text, low,
                high);
  return static_cast<float>(*value);
}

std::uint64_t parse_seed_option(const char* option, const std::string& text) {
  // Unsigned: a '-' is malformed, so -1 does not wrap around.
  const std::optional<std::uint64_t> value = number_from_text<std::uint64_t>(text);
  ADAMANT_CHECK(value.has_value(), "{} {}: give a whole number in [0, 18446744073709551615]", option, text);
  return *value;
}

}  // namespace adamant::tools
