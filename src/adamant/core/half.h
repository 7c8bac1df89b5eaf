#pragma once
// Software bf16/fp16 conversions for the CPU reference path (round to nearest even).
#include <bit>
#include <cmath>
#include <cstdint>

namespace adamant {

using bf16_bits = std::uint16_t;
using f16_bits = std::uint16_t;

inline float bf16_to_f32(bf16_bits h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

inline bf16_bits f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}

// store_param_remainders. The bf16 weight is the fp32 bit pattern rounded half
// away from zero (bits + 0x8000) >> 16; the remainder is the signed 16-bit
// difference, so (bf16 << 16) + int16(remainder) rebuilds the fp32 bits exactly.
// The optimizer uses this rounding for every bf16 weight it writes, so runs with
// and without remainders hold the same weights.
inline bf16_bits bf16_round_for_remainder(float f) {
  return static_cast<bf16_bits>((std::bit_cast<std::uint32_t>(f) + 0x8000u) >> 16);
}
inline std::uint16_t remainder_of(float f, bf16_bits high) {
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) - (static_cast<std::uint32_t>(high) << 16));
}
inline float join_remainder(bf16_bits high, std::uint16_t remainder) {
  const auto low = static_cast<std::int32_t>(static_cast<std::int16_t>(remainder));
  return std::bit_cast<float>((static_cast<std::uint32_t>(high) << 16) + static_cast<std::uint32_t>(low));
}

float f16_to_f32(f16_bits h);
f16_bits f32_to_f16(float f);

}  // namespace adamant
