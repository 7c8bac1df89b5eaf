#include "adamant/train/config_values.h"

#include <fmt/format.h>

#include <limits>

#include "adamant/core/error.h"
#include "adamant/core/number_text.h"

namespace adamant::train::detail {
namespace {

// Plain (unquoted) scalars carry yaml-cpp's non-specific tag "?", quoted ones "!".
bool is_plain_scalar(const YAML::Node& value) { return value.IsScalar() && value.Tag() != "!"; }

[[noreturn]] void type_error(const YAML::Node& value, std::string_view path, std::string_view where,
                             std::string_view expected) {
  std::string hint;
  if (value.IsScalar() && !is_plain_scalar(value)) hint = "; remove the quotes if a number or boolean is meant";
  fail("{}: expected {}, got {}{}{}", path, expected, describe(value), where, hint);
}

void reject_missing(const YAML::Node& value, std::string_view path, std::string_view where) {
  if (is_missing_marker(value)) {
    fail("{}: the value is '?\?\?' (a required value left unset){}; set it in the file or with {}=<value>", path, where,
         path);
  }
}

}  // namespace

std::string describe(const YAML::Node& value) {
  if (!value.IsDefined() || value.IsNull()) return "null";
  if (value.IsMap()) return "a mapping (section)";
  if (value.IsSequence()) {
    YAML::Emitter emitter;
    emitter << YAML::Flow << value;
    return fmt::format("a list {}", emitter.c_str());
  }
  if (!is_plain_scalar(value)) return fmt::format("the string \"{}\"", value.Scalar());
  return fmt::format("'{}'", value.Scalar());
}

bool is_missing_marker(const YAML::Node& value) { return is_plain_scalar(value) && value.Scalar() == "???"; }

std::int64_t read_int64(const YAML::Node& value, std::string_view path, std::string_view where) {
  reject_missing(value, path, where);
  if (!is_plain_scalar(value)) type_error(value, path, where, "an integer");
  std::string_view text = value.Scalar();
  if (text.starts_with('+')) text.remove_prefix(1);
  const NumberText<std::int64_t> read = read_number_text<std::int64_t>(text);
  if (read.error == NumberTextError::out_of_range) fail("{}: {} is out of range for an integer{}", path, text, where);
  if (!read.ok()) type_error(value, path, where, "an integer");
  return read.value;
}

int read_int(const YAML::Node& value, std::string_view path, std::string_view where) {
  const std::int64_t wide = read_int64(value, path, where);
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    fail("{}: {} does not fit a 32-bit integer{}", path, wide, where);
  }
  return static_cast<int>(wide);
}

double read_number(const YAML::Node& value, std::string_view path, std::string_view where) {
  reject_missing(value, path, where);
  if (!is_plain_scalar(value)) type_error(value, path, where, "a number");
  std::string_view text = value.Scalar();
  if (text.starts_with('+')) text.remove_prefix(1);
  const NumberText<double> read = read_number_text<double>(text);
  if (read.error == NumberTextError::not_finite) {
    fail("{}: expected a finite number, got '{}'{}", path, value.Scalar(), where);
  }
  if (!read.ok()) type_error(value, path, where, "a number");
  return read.value;
}

bool read_bool(const YAML::Node& value, std::string_view path, std::string_view where) {
  reject_missing(value, path, where);
  if (is_plain_scalar(value)) {
    const std::string& text = value.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  type_error(value, path, where, "true or false");
}

std::string read_string(const YAML::Node& value, std::string_view path, std::string_view where) {
  reject_missing(value, path, where);
  if (!value.IsScalar()) type_error(value, path, where, "a string");
  return value.Scalar();
}

DType read_precision(const YAML::Node& value, std::string_view path, std::string_view where) {
  constexpr std::string_view kChoices = "32, bf16 (or bf16-mixed) or 16 (or 16-mixed)";
  reject_missing(value, path, where);
  if (!value.IsScalar()) type_error(value, path, where, kChoices);
  DType precision = DType::f32;
  try {
    precision = parse_dtype(value.Scalar(), path);
  } catch (const Error&) {
    fail("{}: unknown precision {}{}; use {}", path, describe(value), where, kChoices);
  }
  if (precision != DType::f32 && precision != DType::bf16 && precision != DType::f16) {
    fail("{}: precision {} is not supported for training{}; use {}", path, describe(value), where, kChoices);
  }
  return precision;
}

std::string format_number(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // 'n': inf/nan never reach here
  return text;
}

std::string format_number(float value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string quote(std::string_view text) {
  YAML::Emitter emitter;
  emitter << YAML::DoubleQuoted << std::string(text);
  return emitter.c_str();
}

}  // namespace adamant::train::detail
