#pragma once
// Numeric command-line values checked in full: the whole text must be the number, in range
// and finite; an error names the option and its allowed range (adamant::Error: exit status 2).
#include <cstdint>
#include <string>

namespace adamant::tools {

int parse_int_option(const char* option, const std::string& text, int low, int high);
float parse_float_option(const char* option, const std::string& text, double low, double high);
// A seed in [0, 2^64): no sign, no wrap-around.
std::uint64_t parse_seed_option(const char* option, const std::string& text);

}  // namespace adamant::tools
