#include "adamant/data/shuffle.h"

namespace adamant::data {

std::uint64_t ShuffleRng::uniform_inclusive(std::uint64_t max) {
  if (max == 0) return 0;
  // Smallest all-ones mask covering max; draws above max are rejected.
  std::uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  std::uint64_t value = 0;
  if (max <= 0xffffffffULL) {
    do {
      value = static_cast<std::uint64_t>(engine_()) & mask;
    } while (value > max);
  } else {
    do {
      const std::uint64_t high = engine_();
      const std::uint64_t low = engine_();
      value = ((high << 32) | low) & mask;
    } while (value > max);
  }
  return value;
}

}  // namespace adamant::data
