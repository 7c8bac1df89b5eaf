#include "adamant/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace adamant {
namespace {

// Known-answer vectors of Philox4x32 published with Random123 (kat_vectors): rounds
// (10, the default; 7, the attention dropout's), counter words, key words, expected output.
struct PhiloxKat {
  int rounds;
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

TEST(Philox, Random123KnownAnswers) {
  constexpr PhiloxCounter kZeros{0, 0, 0, 0};
  constexpr PhiloxCounter kOnes{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
  constexpr PhiloxCounter kPi{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
  const PhiloxKat kats[] = {
      {10, kZeros, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {10, kOnes, {0xffffffff, 0xffffffff}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {10, kPi, {0xa4093822, 0x299f31d0}, {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
      {7, kZeros, {0, 0}, {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
      {7, kOnes, {0xffffffff, 0xffffffff}, {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
      {7, kPi, {0xa4093822, 0x299f31d0}, {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
  };
  for (const PhiloxKat& kat : kats) {
    const PhiloxCounter actual =
        kat.rounds == 7 ? philox4x32<7>(kat.counter, kat.key) : philox4x32(kat.counter, kat.key);
    EXPECT_EQ(actual, kat.expected) << kat.rounds << " rounds";
  }
  // Usable at compile time.
  static_assert(philox4x32({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
  static_assert(philox4x32<7>({0, 0, 0, 0}, {0, 0})[0] == 0x5f6fb709u);
}

TEST(Philox, DrawPacksSeedIndexAndStream) {
  const std::uint64_t seed = 0x299f31d0a4093822ull;
  const std::uint64_t index = 0x85a308d3243f6a88ull;
  const std::uint64_t stream = 0x0370734413198a2eull;
  EXPECT_EQ(philox_draw(seed, index, stream), (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  EXPECT_EQ(philox_draw<7>(seed, index, stream), (PhiloxCounter{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}));
  EXPECT_EQ(philox_key(seed), (PhiloxKey{0xa4093822, 0x299f31d0}));
}

TEST(Philox, UniformRanges) {
  EXPECT_EQ(uniform_float(0), 0.0f);
  EXPECT_LT(uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_float(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_GT(uniform_double_open(0, 0), 0.0);
  EXPECT_EQ(uniform_double_open(0, 0), 0x1p-53);
  EXPECT_EQ(uniform_double_open(0xffffffffu, 0xffffffffu), 1.0);
  // Mean and variance of many draws match U[0, 1): 1/2 and 1/12.
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float u = uniform_float(philox_draw(7, static_cast<std::uint64_t>(i), 1)[i % 4]);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += u * u;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0 / 12.0, 0.002);
}

TEST(Philox, NormalMomentsAndReproducibility) {
  const int n = 200000;
  double sum = 0, sum_sq = 0, sum_4 = 0;
  int beyond_3_sigma = 0;
  for (int i = 0; i < n; ++i) {
    const double z = normal_at(42, static_cast<std::uint64_t>(i), 5);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += z * z;
    sum_4 += z * z * z * z;
    beyond_3_sigma += std::abs(z) > 3.0;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.015);
  EXPECT_NEAR(sum_4 / n, 3.0, 0.1);  // kurtosis of a normal
  EXPECT_NEAR(beyond_3_sigma / static_cast<double>(n), 0.0027, 0.0008);
  // A pure function of (seed, index, stream).
  EXPECT_EQ(normal_at(42, 12345, 5), normal_at(42, 12345, 5));
  EXPECT_NE(normal_at(42, 12345, 5), normal_at(43, 12345, 5));
  EXPECT_NE(normal_at(42, 12345, 5), normal_at(42, 12345, 6));
  // Two values per draw: index 2k and 2k+1 are the Box-Muller pair of draw k.
  const auto pair = normal_pair(philox_draw(42, 6, 5));
  EXPECT_EQ(normal_at(42, 12, 5), pair[0]);
  EXPECT_EQ(normal_at(42, 13, 5), pair[1]);
}

}  // namespace
}  // namespace adamant
