#include "adamant/tools/option_values.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "adamant/core/error.h"

namespace adamant::tools {

int parse_int_option(const char* option, const std::string& text, int low, int high) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  ADAMANT_CHECK(
      error == std::errc() && end == text.data() + text.size() && !text.empty() && value >= low && value <= high,
      "{} {}: give a whole number in [{}, {}]", option, text, low, high);
  return static_cast<int>(value);
}

float parse_float_option(const char* option, const std::string& text, double low, double high) {
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  ADAMANT_CHECK(
      !text.empty() && end == text.c_str() + text.size() && std::isfinite(value) && value >= low && value <= high,
      "{} {}: give a finite number in [{}, {}]", option, text, low, high);
  return static_cast<float>(value);
}

std::uint64_t parse_seed_option(const char* option, const std::string& text) {
  std::uint64_t value = 0;
  const bool digits_only = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  ADAMANT_CHECK(digits_only && error == std::errc() && end == text.data() + text.size(),
                "{} {}: give a whole number in [0, 18446744073709551615]", option, text);
  return value;
}

}  // namespace adamant::tools
