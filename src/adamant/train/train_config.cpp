// Parsing a NeMo-style training config: YAML file, then command-line overrides,
// then a key check against the schema, typed reads with interpolations resolved,
// NeMo compatibility rules, derived defaults and validation.
#include "adamant/train/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "adamant/core/error.h"
#include "adamant/train/config_document.h"
#include "adamant/train/config_schema.h"
#include "adamant/train/config_validate.h"
#include "adamant/train/config_values.h"

namespace adamant::train {
namespace {

using detail::ConfigDocument;

std::string join_key(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// True when `path` may be set by an override: a key of the schema or anything
// inside a NeMo key accepted as a whole (model.nsys_profile.enabled).
bool is_known_path(const std::string& path) {
  if (detail::find_field(path) || detail::find_nemo_key(path) || detail::is_section(path)) return true;
  for (std::size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
    if (detail::find_nemo_key(path.substr(0, dot))) return true;
  }
  return false;
}

// Every key must be in the schema; collects the NeMo keys Adamant does not act on.
void check_keys(const ConfigDocument& document, const YAML::Node& section, const std::string& prefix,
                std::vector<std::string>& ignored) {
  std::set<std::string> seen;
  for (const auto& entry : section) {
    if (!entry.first.IsScalar()) {
      fail("{}: a key under '{}' is not a plain name{}", document.source_name(), prefix.empty() ? "(top)" : prefix,
           document.where(prefix));
    }
    const std::string path = join_key(prefix, entry.first.Scalar());
    // Paths are dotted, so a dotted name would be read as a path of other keys.
    if (entry.first.Scalar().find('.') != std::string::npos) {
      fail(
          "config key '{}'{} has a dot in its name: nest it under its sections in the file, or pass it as the "
          "override {}=VALUE",
          path, document.where(prefix), path);
    }
    if (!seen.insert(entry.first.Scalar()).second) {
      fail("config key '{}' appears twice{}; keep one", path, document.where(path));
    }
    if (detail::find_field(path)) continue;
    if (detail::find_nemo_key(path)) {
      ignored.push_back(path);
      continue;
    }
    if (detail::is_section(path)) {
      if (entry.second.IsNull()) continue;
      if (!entry.second.IsMap()) {
        fail("'{}' is a section and must hold keys, got {}{}", path, detail::describe(entry.second),
             document.where(path));
      }
      check_keys(document, entry.second, path, ignored);
      continue;
    }
    fail("unknown config key '{}'{}{}", path, document.where(path), detail::key_suggestion(path));
  }
}

void apply_overrides(ConfigDocument& document, const std::vector<std::string>& overrides) {
  for (const auto& text : overrides) {
    const detail::Override parsed = detail::parse_override(text);
    if (!is_known_path(parsed.path)) {
      fail("unknown config key '{}' (from override '{}'){}", parsed.path, text, detail::key_suggestion(parsed.path));
    }
    document.apply(parsed);
  }
}

// NeMo's optimizer names map onto Adamant's two: adam is torch.optim.Adam (L2
// decay added to the gradient), adamw decoupled decay; both run as fused_adam.
void normalise_optimizer_name(TrainConfig& config, const ConfigDocument& document) {
  auto& optim = config.optim;
  const bool mode_given = document.raw("model.optim.adam_w_mode").has_value();
  if (optim.name == "adam") {
    optim.name = "fused_adam";
    if (!mode_given) optim.adam_w_mode = false;
  } else if (optim.name == "adamw") {
    if (mode_given && !optim.adam_w_mode) {
      fail(
          "model.optim.name=adamw means decoupled weight decay, but model.optim.adam_w_mode is false{}; remove "
          "adam_w_mode or use model.optim.name: adam",
          document.where("model.optim.adam_w_mode"));
    }
    optim.name = "fused_adam";
    optim.adam_w_mode = true;
  }
}

// Defaults that depend on other keys, as NeMo's own config file sets them.
void derive_defaults(TrainConfig& config, const ConfigDocument& document) {
  auto& model = config.model;
  if (!document.raw("model.max_position_embeddings")) model.max_position_embeddings = model.seq_length;
  if (!document.raw("model.ffn_hidden_size")) model.ffn_hidden_size = 4 * model.hidden_size;
  // Gradients accumulate in the dtype they sync in (model/gpt_config.h).
  model.grad_buffer = config.optim.grad_sync_dtype;
}

}  // namespace

TrainConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                               const std::string& source_name) {
  ConfigDocument document(yaml_text, source_name);
  apply_overrides(document, overrides);
  // `${path}` to a known key left out of the file resolves to Adamant's default.
  document.set_default_lookup([](std::string_view path) -> std::optional<YAML::Node> {
    const detail::FieldSpec* field = detail::find_field(path);
    if (field == nullptr) return std::nullopt;
    return YAML::Load(field->write(TrainConfig{}));
  });

  TrainConfig config;
  check_keys(document, document.root(), "", config.ignored_keys);
  std::sort(config.ignored_keys.begin(), config.ignored_keys.end());

  for (const auto& field : detail::config_fields()) {
    if (const auto value = document.resolved(field.path)) field.read(*value, document.where(field.path), config);
  }
  derive_defaults(config, document);
  for (const auto& path : config.ignored_keys) {
    const detail::NemoKeySpec* key = detail::find_nemo_key(path);
    if (key->check) key->check(*document.resolved(path), document.where(path), config);
  }
  normalise_optimizer_name(config, document);
  detail::validate_train_config(config, document);
  return config;
}

TrainConfig load_train_config(const std::filesystem::path& yaml_file, const std::vector<std::string>& overrides) {
  std::ifstream in(yaml_file, std::ios::binary);
  if (!in) {
    fail(
        "cannot open config file {}; check the path (the configs/ folder holds ready-made ones, e.g. "
        "configs/gpt3-126m.yaml)",
        yaml_file.string());
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_train_config(text.str(), overrides, yaml_file.string());
}

std::string to_yaml(const TrainConfig& config) {
  std::string out = "# Adamant training config (resolved: every key, defaults filled in)\n";
  std::vector<std::string> open_sections;  // the section path of the previous line
  for (const auto& field : detail::config_fields()) {
    std::vector<std::string> parts = detail::split_path(field.path);
    const std::string leaf = parts.back();
    parts.pop_back();
    std::size_t common = 0;
    while (common < parts.size() && common < open_sections.size() && parts[common] == open_sections[common]) ++common;
    for (std::size_t depth = common; depth < parts.size(); ++depth) {
      out += fmt::format("{:{}}{}:\n", "", 2 * depth, parts[depth]);
    }
    out += fmt::format("{:{}}{}: {}\n", "", 2 * parts.size(), leaf, field.write(config));
    open_sections = std::move(parts);
  }
  return out;
}

std::string config_keys_markdown() {
  const TrainConfig defaults;
  std::string out = "| key | default | meaning |\n|---|---|---|\n";
  for (const auto& field : detail::config_fields()) {
    std::string value = field.derived_default;
    if (value.empty()) {
      const YAML::Node written = YAML::Load(field.write(defaults));
      const std::string text = written.IsScalar() ? written.Scalar() : field.write(defaults);
      value = text.empty() ? "(empty)" : fmt::format("`{}`", text);
    }
    out += fmt::format("| `{}` | {} | {} |\n", field.path, value, field.meaning);
  }
  return out;
}

DType weight_dtype_of(const TrainConfig& config) {
  return config.optim.megatron_amp_O2 ? config.trainer.precision : DType::f32;
}

optim::OptimizerOptions optimizer_options_of(const TrainConfig& config) {
  optim::OptimizerOptions options = config.optim;
  options.model_dtype = weight_dtype_of(config);
  return options;
}

optim::LrSchedule lr_schedule_of(const TrainConfig& config) {
  optim::LrSchedule schedule = config.sched;
  if (schedule.max_steps == 0) schedule.max_steps = config.trainer.max_steps;
  return schedule;
}

std::string ignored_keys_warning(const TrainConfig& config) {
  if (config.ignored_keys.empty()) return "";
  return fmt::format("warning: {} NeMo config key(s) accepted but not used by Adamant: {}", config.ignored_keys.size(),
                     fmt::join(config.ignored_keys, ", "));
}

}  // namespace adamant::train
