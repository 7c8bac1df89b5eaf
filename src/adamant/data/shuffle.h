#pragma once
// The shuffles behind Megatron's sample order, reproduced exactly: numpy's legacy
// RandomState(seed) (MT19937 seeded with init_genrand) and its shuffle, a
// Fisher-Yates walk from the back that draws each index by masked rejection
// sampling. Same seed, same permutation as Megatron-LM/NeMo, on any platform
// (only the engine's raw output is used, which the C++ standard fixes).
#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace adamant::data {

class ShuffleRng {
 public:
  explicit ShuffleRng(std::uint32_t seed) : engine_(seed) {}

  // Uniform integer in [0, max], as numpy's random_interval draws it.
  std::uint64_t uniform_inclusive(std::uint64_t max);

  // In-place permutation, the same as numpy.random.RandomState.shuffle on a 1-D array.
  template <typename T>
  void shuffle(std::span<T> values) {
    for (std::size_t i = values.size(); i-- > 1;) {
      const auto j = static_cast<std::size_t>(uniform_inclusive(i));
      std::swap(values[i], values[j]);
    }
  }

 private:
  std::mt19937 engine_;
};

}  // namespace adamant::data
