#include "adamant/core/half.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace adamant {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
}

TEST(Half, Fp16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half round-trips
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<f16_bits>(h))), h);
  }
}

TEST(Half, RemainderRoundTripIsExact) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits(0x00800000u, 0x7f7effffu);  // normal numbers
  for (int i = 0; i < 1000000; ++i) {
    std::uint32_t u = bits(rng) | (i & 1 ? 0x80000000u : 0u);
    float f;
    std::memcpy(&f, &u, 4);
    const bf16_bits high = bf16_round_for_remainder(f);
    const float back = join_remainder(high, remainder_of(f, high));
    ASSERT_EQ(std::memcmp(&back, &f, 4), 0) << std::hex << u;
    // The high half is within half a bf16 ulp of f.
    ASSERT_LE(std::abs(bf16_to_f32(high) - f), std::abs(f) * (1.0f / 256.0f));
  }
}

}  // namespace
}  // namespace adamant
