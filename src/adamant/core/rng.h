#pragma once
// Counter-based random numbers (Philox4x32, Salmon et al., SC'11; ten rounds unless a
// user says otherwise). A value is a pure function of (key, counter), so any element of
// any tensor can be drawn independently: weight init, dropout masks and sampling stay
// reproducible no matter how work is split across threads, micro-batches or ranks.
#include <array>
#include <cstdint>

namespace adamant {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

// The Philox4x32 bijection of `counter` under `key`: ten rounds, the authors'
// recommendation, or seven, the fewest that pass TestU01's BigCrush (the attention
// dropout's, kernels/attention_dropout_layout.h).
template <int kRounds = 10>
constexpr PhiloxCounter philox4x32(PhiloxCounter counter, PhiloxKey key) {
  static_assert(kRounds == 7 || kRounds == 10, "Philox4x32 is used with 7 or 10 rounds");
  constexpr std::uint64_t kMultiplier0 = 0xD2511F53u;
  constexpr std::uint64_t kMultiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < kRounds; ++round) {
    const std::uint64_t product0 = kMultiplier0 * counter[0];
    const std::uint64_t product1 = kMultiplier1 * counter[2];
    const auto hi0 = static_cast<std::uint32_t>(product0 >> 32);
    const auto lo0 = static_cast<std::uint32_t>(product0);
    const auto hi1 = static_cast<std::uint32_t>(product1 >> 32);
    const auto lo1 = static_cast<std::uint32_t>(product1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

constexpr PhiloxKey philox_key(std::uint64_t seed) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
}

// Four 32-bit words for (seed, a 64-bit index, a 64-bit stream id): the layout every
// user of the generator in Adamant follows, so that streams never overlap.
template <int kRounds = 10>
constexpr PhiloxCounter philox_draw(std::uint64_t seed, std::uint64_t index, std::uint64_t stream) {
  return philox4x32<kRounds>({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                              static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                             philox_key(seed));
}

// Uniform in [0, 1) with 24 random bits (every value exactly representable in fp32).
constexpr float uniform_float(std::uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

// Uniform in (0, 1] with 53 random bits from two words; never 0, so log() is finite.
constexpr double uniform_double_open(std::uint32_t high_bits, std::uint32_t low_bits) {
  const std::uint64_t bits53 = ((static_cast<std::uint64_t>(high_bits) << 32) | low_bits) >> 11;
  return static_cast<double>(bits53 + 1) * 0x1p-53;
}

// Two independent standard normal values (Box-Muller) from one Philox draw.
std::array<double, 2> normal_pair(const PhiloxCounter& words);

// Standard normal value number `index` of stream `stream` under `seed`.
double normal_at(std::uint64_t seed, std::uint64_t index, std::uint64_t stream);

}  // namespace adamant
