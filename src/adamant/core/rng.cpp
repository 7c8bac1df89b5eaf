#include "adamant/core/rng.h"

#include <cmath>

namespace adamant {

std::array<double, 2> normal_pair(const PhiloxCounter& words) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double radius = std::sqrt(-2.0 * std::log(uniform_double_open(words[0], words[1])));
  const double angle = kTwoPi * uniform_double_open(words[2], words[3]);
  return {radius * std::cos(angle), radius * std::sin(angle)};
}

double normal_at(std::uint64_t seed, std::uint64_t index, std::uint64_t stream) {
  return normal_pair(philox_draw(seed, index / 2, stream))[index % 2];
}

}  // namespace adamant
