#include "adamant/core/option_checks.h"

#include <algorithm>

namespace adamant {

void OptionChecks::divisible(std::string_view key, long long value, std::string_view divisor_key,
                             long long divisor) const {
  if (divisor > 0 && value % divisor != 0) {
    fail("{} ({}) must be divisible by {} ({}){}; change one of them", key, value, divisor_key, divisor, where(key));
  }
}

void OptionChecks::one_of(std::string_view key, std::string_view value, std::initializer_list<std::string_view> allowed,
                          std::string_view what, std::string_view fix) const {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    fail("{}: unknown {} '{}'{}; {}", key, what, value, where(key), fix);
  }
}

}  // namespace adamant
