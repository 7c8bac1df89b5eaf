// Reading one number from a whole text (core/number_text.h): known texts and what each must give.
#include "adamant/core/number_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string_view>

namespace adamant {
namespace {

template <typename Number>
NumberTextError error_of(std::string_view text, int base = 10) {
  return read_number_text<Number>(text, base).error;
}

TEST(NumberText, WholeNumbersReadInFull) {
  EXPECT_EQ(number_from_text<int>("42"), 42);
  EXPECT_EQ(number_from_text<int>("-7"), -7);
  EXPECT_EQ(number_from_text<int>("0"), 0);
  EXPECT_EQ(number_from_text<std::uint64_t>("18446744073709551615"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(number_from_text<std::uint64_t>("ff", 16), 255u);
  EXPECT_EQ(number_from_text<std::int64_t>("-9223372036854775808"), std::numeric_limits<std::int64_t>::min());
}

TEST(NumberText, AnythingAroundTheDigitsIsMalformed) {
  for (const char* text : {"", "+1", " 5", "5 ", "5x", "0x10", "1e3", "1.5", "--1", "abc", "-"}) {
    EXPECT_EQ(error_of<int>(text), NumberTextError::malformed) << '"' << text << '"';
    EXPECT_FALSE(number_from_text<int>(text).has_value()) << '"' << text << '"';
  }
  // An unsigned type takes no sign, so -1 never wraps around to the largest value.
  EXPECT_EQ(error_of<std::uint64_t>("-1"), NumberTextError::malformed);
  EXPECT_EQ(error_of<std::uint64_t>("0x1f", 16), NumberTextError::malformed);
  EXPECT_EQ(error_of<std::uint64_t>("1g", 16), NumberTextError::malformed);
}

TEST(NumberText, NumbersBeyondTheTypeAreOutOfRange) {
  EXPECT_EQ(error_of<int>("2147483648"), NumberTextError::out_of_range);
  EXPECT_EQ(error_of<int>("-2147483649"), NumberTextError::out_of_range);
  EXPECT_EQ(number_from_text<int>("2147483647"), 2147483647);
  EXPECT_EQ(error_of<std::uint64_t>("18446744073709551616"), NumberTextError::out_of_range);
  EXPECT_EQ(error_of<double>("1e999"), NumberTextError::out_of_range);
  EXPECT_FALSE(number_from_text<double>("1e999").has_value());
}

TEST(NumberText, FloatingValuesAreDecimalAndFinite) {
  EXPECT_EQ(number_from_text<double>("0.25"), 0.25);
  EXPECT_EQ(number_from_text<double>("-1e-3"), -1e-3);
  EXPECT_EQ(number_from_text<double>("1e3"), 1000.0);
  EXPECT_EQ(number_from_text<double>("7"), 7.0);
  EXPECT_EQ(number_from_text<float>("0.1"), 0.1f);
  for (const char* text : {"inf", "-inf", "nan", "infinity"}) {
    EXPECT_EQ(error_of<double>(text), NumberTextError::not_finite) << text;
    EXPECT_FALSE(number_from_text<double>(text).has_value()) << text;
  }
  for (const char* text : {"", "+0.5", " 0.5", "0.5 ", "0.5x", "0x1p3", ".", "1e"}) {
    EXPECT_EQ(error_of<double>(text), NumberTextError::malformed) << '"' << text << '"';
  }
}

}  // namespace
}  // namespace adamant
