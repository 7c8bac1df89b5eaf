#pragma once
// Range checks for the option structs each layer owns (model::GptConfig,
// optim::OptimizerOptions, data::DataOptions, the trainer's options). Each struct
// validates itself and names the YAML key of a bad value; where the value came
// from (a file line, a command-line override) is known only to the config parser,
// which passes it in as a KeyOrigin.
#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>

#include "adamant/core/error.h"

namespace adamant {

// " (in run.yaml, line 12)" for a key; empty when the options were not read from a file.
using KeyOrigin = std::function<std::string(std::string_view key)>;

class OptionChecks {
 public:
  explicit OptionChecks(const KeyOrigin& origin) : origin_(origin) {}

  std::string where(std::string_view key) const { return origin_ ? origin_(key) : std::string(); }

  // "<key> must be >= <minimum> (got <value>)<where>; it is <meaning>".
  template <typename T>
  void at_least(std::string_view key, T value, T minimum, std::string_view meaning) const {
    if (value < minimum) fail("{} must be >= {} (got {}){}; it is {}", key, minimum, value, where(key), meaning);
  }
  // Values keep their type so that a float prints as written (0.1, not 0.10000000149011612).
  template <typename T>
  void positive(std::string_view key, T value, std::string_view meaning) const {
    if (!(value > T(0))) fail("{} must be > 0 (got {}){}; it is {}", key, value, where(key), meaning);
  }
  // A probability in [0, 1), e.g. a dropout rate.
  template <typename T>
  void fraction(std::string_view key, T value, std::string_view meaning) const {
    if (!(value >= T(0) && value < T(1))) {
      fail("{} must be in [0, 1) (got {}){}; it is {}", key, value, where(key), meaning);
    }
  }
  void divisible(std::string_view key, long long value, std::string_view divisor_key, long long divisor) const;
  // One of `allowed`; `fix` says what to write instead.
  void one_of(std::string_view key, std::string_view value, std::initializer_list<std::string_view> allowed,
              std::string_view what, std::string_view fix) const;

 private:
  const KeyOrigin& origin_;
};

}  // namespace adamant
