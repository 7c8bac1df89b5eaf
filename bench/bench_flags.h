#pragma once
// The command line of a bench program: the flags it takes, each at most once, a value flag
// with its value in the next argument, a switch alone. Any mistake ends the program with
// status 2, saying what was wrong and showing the usage line, so that a bench never runs
// with a value its caller did not mean (std::atoi reads "abc" as 0). Host code only, so
// that both bench/*.cu and bench/*.cpp can use it.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adamant/core/number_text.h"

namespace adamant::bench {

class BenchFlags {
 public:
  // `usage` is what follows the program's name on the usage line, e.g. "[--reps N] [--json PATH]".
  BenchFlags(int argc, char** argv, std::string program, std::string usage, std::vector<std::string> value_flags,
             std::vector<std::string> switches = {})
      : program_(std::move(program)),
        usage_(std::move(usage)),
        value_flags_(std::move(value_flags)),
        switches_(std::move(switches)) {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (declared(switches_, flag)) {
        if (!given_switches_.insert(flag).second) fail(flag + " is given twice");
      } else if (declared(value_flags_, flag)) {
        // A following flag is not a value: `--json --reps 5` lacks the path.
        if (i + 1 == argc || std::string_view(argv[i + 1]).substr(0, 2) == "--") fail(flag + " needs a value");
        if (!values_.emplace(flag, argv[++i]).second) fail(flag + " is given twice");
      } else {
        fail(flag + " is not a flag this program takes");
      }
    }
  }

  bool switch_given(std::string_view switch_flag) const {
    require_declared(switches_, switch_flag);
    return given_switches_.count(switch_flag) != 0;
  }

  std::string text(std::string_view flag, std::string fallback) const {
    const std::string* value = value_of(flag);
    return value == nullptr ? fallback : *value;
  }

  // The value, which must be one of `choices`.
  std::string one_of(std::string_view flag, std::string fallback, const std::vector<std::string>& choices) const {
    const std::string value = text(flag, std::move(fallback));
    std::string listed;
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (choices[i] == value) return value;
      listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    }
    fail(std::string(flag) + " " + value + " is not " + listed);
  }

  // A whole number in [at_least, at_most], written in decimal with nothing around it.
  int whole_number(std::string_view flag, int fallback, int at_least, int at_most = INT_MAX) const {
    const std::string* value = value_of(flag);
    if (value == nullptr) return fallback;
    const std::string expected =
        at_most == INT_MAX ? "a whole number of at least " + std::to_string(at_least)
                           : "a whole number from " + std::to_string(at_least) + " to " + std::to_string(at_most);
    const NumberText<int> read = read_number_text<int>(*value);
    if (read.error == NumberTextError::out_of_range) {
      fail(std::string(flag) + " " + *value + " is out of range: expected " + expected);
    }
    const int number = read.value;
    if (!read.ok() || number < at_least || number > at_most) {
      fail(std::string(flag) + " " + *value + " is not " + expected);
    }
    return number;
  }

  // Comma-separated whole numbers in [at_least, at_most] (`fallback` when the flag is absent).
  std::vector<int> whole_numbers(std::string_view flag, const std::string& fallback, int at_least,
                                 int at_most = INT_MAX) const {
    const std::string* value = value_of(flag);
    const std::string text = value == nullptr ? fallback : *value;
    std::vector<int> numbers;
    std::string_view rest = text;
    for (;;) {
      const std::size_t comma = rest.find(',');
      const NumberText<int> read = read_number_text<int>(std::string(rest.substr(0, comma)));
      if (!read.ok() || read.value < at_least || read.value > at_most) {
        fail(std::string(flag) + " " + text + " is not a comma-separated list of whole numbers from " +
             std::to_string(at_least) + (at_most == INT_MAX ? " up" : " to " + std::to_string(at_most)));
      }
      numbers.push_back(read.value);
      if (comma == std::string_view::npos) return numbers;
      rest.remove_prefix(comma + 1);
    }
  }

  // A finite number in [at_least, below), written in decimal with nothing around it.
  double number(std::string_view flag, double fallback, double at_least, double below) const {
    const std::string* value = value_of(flag);
    if (value == nullptr) return fallback;
    const std::optional<double> number = number_from_text<double>(*value);
    if (!number || *number < at_least || *number >= below) {
      fail(std::string(flag) + " " + *value + " is not a number of at least " + shown(at_least) + " and below " +
           shown(below));
    }
    return *number;
  }

  // Ends the program with status 2, saying `what` and showing the usage line: also for the
  // checks a bench makes of the values it read.
  [[noreturn]] void fail(const std::string& what) const {
    std::fprintf(stderr, "%s: %s\nusage: %s %s\n", program_.c_str(), what.c_str(), program_.c_str(), usage_.c_str());
    std::exit(2);
  }

 private:
  using Names = std::vector<std::string>;

  static bool declared(const Names& names, std::string_view name) {
    for (const std::string& candidate : names) {
      if (candidate == name) return true;
    }
    return false;
  }

  static std::string shown(double number) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", number);
    return text;
  }

  // Asking for a flag the program did not declare is a bug in the bench, not in its command line.
  void require_declared(const Names& names, std::string_view flag) const {
    if (declared(names, flag)) return;
    std::fprintf(stderr, "%s: asks for %.*s, which it does not declare\n", program_.c_str(),
                 static_cast<int>(flag.size()), flag.data());
    std::abort();
  }

  // The value given, or nullptr where the flag is absent.
  const std::string* value_of(std::string_view flag) const {
    require_declared(value_flags_, flag);
    const auto found = values_.find(flag);
    return found == values_.end() ? nullptr : &found->second;
  }

  std::string program_;
  std::string usage_;
  Names value_flags_;
  Names switches_;
  std::map<std::string, std::string, std::less<>> values_;
  std::set<std::string, std::less<>> given_switches_;
};

}  // namespace adamant::bench
