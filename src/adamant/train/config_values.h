#pragma once
// Typed reads of single YAML values for the training config, strict in the way
// OmegaConf is for typed keys: no float where an integer is expected, no quoted
// "5" where a number is expected, only true/false for booleans. Each error names
// the key, the value found, the type expected and where the value came from.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "adamant/core/dtype.h"

namespace adamant::train::detail {

// `where` is ConfigDocument::where(path): " (in file.yaml, line 3)" or an override.
std::int64_t read_int64(const YAML::Node& value, std::string_view path, std::string_view where);
int read_int(const YAML::Node& value, std::string_view path, std::string_view where);
double read_number(const YAML::Node& value, std::string_view path, std::string_view where);
bool read_bool(const YAML::Node& value, std::string_view path, std::string_view where);
std::string read_string(const YAML::Node& value, std::string_view path, std::string_view where);
// trainer.precision: 32, "32", bf16, bf16-mixed, 16, 16-mixed (and parse_dtype's spellings).
DType read_precision(const YAML::Node& value, std::string_view path, std::string_view where);

// A value as shown in messages: 'abc', the string "5", a list [1, 2], a mapping, null.
std::string describe(const YAML::Node& value);
// True for OmegaConf's "???" (a mandatory value left unset).
bool is_missing_marker(const YAML::Node& value);

// YAML text for values written by to_yaml: the shortest form that reads back to
// the same double, always with a '.' or exponent; strings double-quoted and escaped.
std::string format_number(double value);
std::string format_number(float value);  // the shortest text of the float: 0.1f gives 0.1
std::string quote(std::string_view text);

}  // namespace adamant::train::detail
