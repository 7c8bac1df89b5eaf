#include "adamant/train/config_document.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "adamant/core/error.h"

namespace adamant::train::detail {
namespace {

// Bounds on what resolving a config may produce; a real config is a few hundred values.
constexpr std::size_t kMaxExpandedValues = 100'000;
constexpr std::size_t kMaxInterpolatedBytes = 1 << 20;

// The values of `node` as resolution visits them (an alias counts each time it appears), counting
// stopped once past `limit`: cheap, where building the resolved copy of an alias bomb is not.
std::size_t count_values(const YAML::Node& node, std::size_t limit) {
  std::size_t count = 1;
  if (node.IsSequence()) {
    for (const auto& element : node) {
      count += count_values(element, limit);
      if (count > limit) break;
    }
  } else if (node.IsMap()) {
    for (const auto& entry : node) {
      count += count_values(entry.second, limit);
      if (count > limit) break;
    }
  }
  return count;
}

bool is_identifier(std::string_view text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_')) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string join(const std::vector<std::string>& parts, std::size_t count) {
  std::string joined;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) joined += '.';
    joined += parts[i];
  }
  return joined;
}

bool has_prefix_path(std::string_view path, std::string_view prefix) {
  return path == prefix ||
         (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix && path[prefix.size()] == '.');
}

// A string produced by interpolating into text is a string, as in OmegaConf: tag it
// like a quoted scalar so that typed reads treat it as text, not as a number.
YAML::Node string_node(const std::string& text) {
  YAML::Node node(text);
  node.SetTag("!");
  return node;
}

}  // namespace

std::vector<std::string> split_path(std::string_view dotted) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t dot = dotted.find('.', begin);
    parts.emplace_back(dotted.substr(begin, dot == std::string_view::npos ? std::string_view::npos : dot - begin));
    if (dot == std::string_view::npos) break;
    begin = dot + 1;
  }
  return parts;
}

bool is_valid_path(std::string_view dotted) {
  const auto parts = split_path(dotted);
  return std::all_of(parts.begin(), parts.end(), [](const std::string& part) { return is_identifier(part); });
}

std::optional<YAML::Node> find_child(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return std::nullopt;
  for (const auto& entry : map) {
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.second;
  }
  return std::nullopt;
}

Override parse_override(std::string_view text) {
  constexpr std::string_view kForm = "expected key=value, e.g. model.optim.lr=3e-4 or model.optim.betas=[0.9,0.95]";
  std::string_view body = text;
  if (body.starts_with("~")) {
    fail("override '{}': removing keys (~key) is not supported; set the key to a value instead ({})", text, kForm);
  }
  if (body.starts_with("++")) {
    body.remove_prefix(2);
  } else if (body.starts_with("+")) {
    body.remove_prefix(1);
  }
  const std::size_t equals = body.find('=');
  if (equals == std::string_view::npos) fail("malformed override '{}': no '='; {}", text, kForm);
  Override result;
  result.path = std::string(body.substr(0, equals));
  result.text = std::string(text);
  if (!is_valid_path(result.path)) {
    fail("malformed override '{}': '{}' is not a dotted key path; {}", text, result.path, kForm);
  }
  const std::string value_text(body.substr(equals + 1));
  if (value_text.empty()) {
    result.value = string_node("");  // Hydra reads `key=` as the empty string
    return result;
  }
  try {
    result.value = YAML::Load(value_text);
  } catch (const YAML::Exception& error) {
    fail("override '{}': the value '{}' is not valid YAML ({}); quote strings with special characters", text,
         value_text, error.msg);
  }
  return result;
}

ConfigDocument::ConfigDocument(const std::string& yaml_text, std::string source_name)
    : source_name_(std::move(source_name)) {
  try {
    root_ = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    fail("{}: YAML syntax error at line {}, column {}: {}", source_name_, error.mark.line + 1, error.mark.column + 1,
         error.msg);
  }
  if (root_.IsNull()) {
    root_ = YAML::Node(YAML::NodeType::Map);
  } else if (!root_.IsMap()) {
    fail("{}: the top level must be a mapping with the sections trainer:, model: and exp_manager:", source_name_);
  }
}

void ConfigDocument::apply(const Override& override_value) {
  const auto parts = split_path(override_value.path);
  YAML::Node current = root_;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    auto child = find_child(current, parts[i]);
    if (!child || child->IsNull()) {
      current[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = find_child(current, parts[i]);
    } else if (!child->IsMap()) {
      fail("override '{}': '{}' holds a value, not a section, so it has no key '{}'", override_value.text,
           join(parts, i + 1), parts[i + 1]);
    }
    current.reset(*child);  // reset, not assignment: assignment would overwrite the parent's content
  }
  current[parts.back()] = override_value.value;
  override_text_[override_value.path] = override_value.text;
  resolved_references_.clear();
}

std::optional<YAML::Node> ConfigDocument::raw(std::string_view path) const {
  YAML::Node current = root_;
  for (const auto& part : split_path(path)) {
    auto child = find_child(current, part);
    if (!child) return std::nullopt;
    current.reset(*child);
  }
  return current;
}

std::optional<YAML::Node> ConfigDocument::resolved(std::string_view path) const {
  const auto node = raw(path);
  if (!node) return std::nullopt;
  const std::size_t values = count_values(*node, kMaxExpandedValues);
  if (values > kMaxExpandedValues) count_expanded(std::string(path), values);  // throws
  std::vector<std::string> stack{std::string(path)};
  return resolve_node(std::string(path), *node, stack);
}

std::string ConfigDocument::where(std::string_view path) const {
  const std::string* best = nullptr;
  std::size_t best_length = 0;
  for (const auto& [override_path, text] : override_text_) {
    if (has_prefix_path(path, override_path) && override_path.size() >= best_length) {
      best = &text;
      best_length = override_path.size();
    }
  }
  if (best != nullptr) return fmt::format(" (from override '{}')", *best);
  // The key's own line: a section's or a null value's mark points elsewhere.
  YAML::Node current = root_;
  std::optional<YAML::Mark> mark;
  for (const auto& part : split_path(path)) {
    mark.reset();
    if (!current.IsMap()) break;
    for (const auto& entry : current) {
      if (entry.first.IsScalar() && entry.first.Scalar() == part) {
        mark = entry.first.Mark();
        current.reset(entry.second);
        break;
      }
    }
    if (!mark) break;
  }
  if (mark && mark->line >= 0) return fmt::format(" (in {}, line {})", source_name_, mark->line + 1);
  return fmt::format(" (in {})", source_name_);
}

void ConfigDocument::count_expanded(const std::string& path, std::size_t values) const {
  expanded_values_ += values;
  if (expanded_values_ > kMaxExpandedValues) {
    fail(
        "{}: the config expands to more than {} values{}: YAML aliases (*name) or ${{...}} references repeat a "
        "section many times over; write the values out instead of nesting aliases or references",
        path, kMaxExpandedValues, where(path));
  }
}

YAML::Node ConfigDocument::resolve_node(const std::string& path, const YAML::Node& node,
                                        std::vector<std::string>& stack) const {
  count_expanded(path, 1);
  if (node.IsSequence()) {
    YAML::Node sequence(YAML::NodeType::Sequence);
    for (const auto& element : node) sequence.push_back(resolve_node(path, element, stack));
    return sequence;
  }
  if (node.IsMap()) {
    YAML::Node map(YAML::NodeType::Map);
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      map[key] = resolve_node(path + "." + key, entry.second, stack);
    }
    return map;
  }
  if (!node.IsScalar()) return node;
  const std::string& text = node.Scalar();
  std::size_t start = text.find("${");
  if (start == std::string::npos) return node;

  std::string interpolated;
  std::size_t copied = 0;
  while (start != std::string::npos) {
    const std::size_t close = text.find('}', start);
    if (close == std::string::npos) {
      fail("{}: unterminated interpolation in '{}'{}; write ${{path.to.key}}", path, text, where(path));
    }
    const std::string reference = text.substr(start + 2, close - start - 2);
    const bool whole_value = start == 0 && close + 1 == text.size();
    if (whole_value) return resolve_reference(path, reference, stack);  // keeps the referenced type
    const YAML::Node value = resolve_reference(path, reference, stack);
    if (!value.IsScalar()) {
      fail("{}: '${{{}}}' inside the text '{}' must name a single value, not a list or section{}", path, reference,
           text, where(path));
    }
    interpolated += text.substr(copied, start - copied) + value.Scalar();
    if (interpolated.size() > kMaxInterpolatedBytes) {
      fail("{}: its ${{...}} references expand to more than {} bytes of text{}; write the value instead", path,
           kMaxInterpolatedBytes, where(path));
    }
    copied = close + 1;
    start = text.find("${", copied);
  }
  interpolated += text.substr(copied);
  return string_node(interpolated);
}

std::string ConfigDocument::absolute_reference(const std::string& path, const std::string& reference) const {
  std::size_t dots = 0;
  while (dots < reference.size() && reference[dots] == '.') ++dots;
  const std::string target = reference.substr(dots);
  if (!is_identifier(split_path(target).front()) || !is_valid_path(target)) {
    fail(
        "{}: unsupported interpolation '${{{}}}'{}; Adamant resolves only plain references such as "
        "${{model.encoder_seq_length}} or ${{.encoder_seq_length}} (no resolvers like oc.env: or multiply:, no "
        "nesting); write the value instead",
        path, reference, where(path));
  }
  if (dots == 0) return target;
  // OmegaConf: one leading dot is the key's own section, each further dot one level up.
  const auto parts = split_path(path);
  if (dots > parts.size()) {
    fail("{}: '${{{}}}' goes above the top of the config{}", path, reference, where(path));
  }
  const std::string base = join(parts, parts.size() - dots);
  return base.empty() ? target : base + "." + target;
}

YAML::Node ConfigDocument::resolve_reference(const std::string& path, const std::string& reference,
                                             std::vector<std::string>& stack) const {
  const std::string target = absolute_reference(path, reference);
  if (std::find(stack.begin(), stack.end(), target) != stack.end()) {
    fail("interpolation cycle: {} -> {}{}; replace one of the references by a value", fmt::join(stack, " -> "), target,
         where(path));
  }
  if (const auto memo = resolved_references_.find(target); memo != resolved_references_.end()) {
    count_expanded(path, memo->second.values);
    return memo->second.value;
  }
  const auto node = raw(target);
  if (!node) {
    if (default_lookup_) {
      if (auto fallback = default_lookup_(target)) return *fallback;
    }
    fail("{}: '${{{}}}' refers to '{}', which is not in the config{}; set '{}' or write the value", path, reference,
         target, where(path), target);
  }
  stack.push_back(target);
  const std::size_t before = expanded_values_;
  YAML::Node value = resolve_node(target, *node, stack);
  stack.pop_back();
  resolved_references_.emplace(target, ResolvedReference{value, expanded_values_ - before});
  return value;
}

}  // namespace adamant::train::detail
