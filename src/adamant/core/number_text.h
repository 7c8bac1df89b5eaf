#pragma once
// One number read from the whole of a text, the way every parser of ours reads one
// (command-line flags, environment variables, config fields, file names): std::from_chars,
// so an optional '-' and nothing else around the digits (no '+', no spaces, no "0x"), and a
// floating value must be finite. Anything left over makes the text malformed, so that "5x"
// never reads as 5, nor "1e3" as the whole number 1.
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace adamant {

// not_finite: "inf" or "nan", which from_chars reads as floating values.
enum class NumberTextError { none, malformed, out_of_range, not_finite };

template <typename Number>
struct NumberText {
  Number value{};
  NumberTextError error = NumberTextError::malformed;

  bool ok() const { return error == NumberTextError::none; }
};

// `base` is for integers (16 for hexadecimal words); floating values are decimal.
template <typename Number>
NumberText<Number> read_number_text(std::string_view text, int base = 10) {
  static_assert(std::is_arithmetic_v<Number> && !std::is_same_v<Number, bool>);
  NumberText<Number> result;
  if (text.empty()) return result;
  const char* end = text.data() + text.size();
  std::from_chars_result read{};
  if constexpr (std::is_floating_point_v<Number>) {
    read = std::from_chars(text.data(), end, result.value);
  } else {
    read = std::from_chars(text.data(), end, result.value, base);
  }
  if (read.ec == std::errc::result_out_of_range && read.ptr == end) {
    result.error = NumberTextError::out_of_range;
  } else if (read.ec == std::errc() && read.ptr == end) {
    bool finite = true;
    if constexpr (std::is_floating_point_v<Number>) finite = std::isfinite(result.value);
    result.error = finite ? NumberTextError::none : NumberTextError::not_finite;
  }
  return result;
}

// The number, or nullopt where the text is not one whole number in the type's range.
template <typename Number>
std::optional<Number> number_from_text(std::string_view text, int base = 10) {
  const NumberText<Number> read = read_number_text<Number>(text, base);
  if (!read.ok()) return std::nullopt;
  return read.value;
}

}  // namespace adamant
