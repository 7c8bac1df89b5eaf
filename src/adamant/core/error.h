#pragma once
// Errors with context. Every failure a user can cause (config, data, checkpoint,
// flag) throws adamant::Error whose message names the thing and the fix.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace adamant {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace adamant

// ADAMANT_CHECK(cond, "format {}", args...): throws adamant::Error with the message.
#define ADAMANT_CHECK(cond, ...)    \
  do {                              \
    if (!(cond)) {                  \
      ::adamant::fail(__VA_ARGS__); \
    }                               \
  } while (false)
