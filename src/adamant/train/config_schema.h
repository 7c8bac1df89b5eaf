#pragma once
// The key schema of the training config: the keys Adamant acts on (each the YAML
// path of one field of a layer's option struct, with its reader, writer and
// meaning; the defaults and checks are the structs'), the NeMo keys it recognises but
// does not act on (with the values it can honour), the sections they live in, and
// did-you-mean suggestions for anything else.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adamant/train/train_config.h"

namespace adamant::train::detail {

struct FieldSpec {
  std::string path;     // NeMo YAML path, e.g. model.optim.lr
  std::string meaning;  // one line for docs/config.md
  // The default when it follows other keys ("4 x model.hidden_size"); empty: write(TrainConfig{}).
  std::string derived_default;
  // Reads a resolved value (never absent; may be null) into the config; `where` is for messages.
  std::function<void(const YAML::Node& value, const std::string& where, TrainConfig& config)> read;
  // The field's value as YAML flow text (for to_yaml and for `${...}` to a key left at its default).
  std::function<std::string(const TrainConfig& config)> write;
};

// In to_yaml order; fields of one section are contiguous.
const std::vector<FieldSpec>& config_fields();
const FieldSpec* find_field(std::string_view path);

// A NeMo key accepted for compatibility. `check` is empty when any value is fine;
// otherwise it throws for values that would change the maths in a way Adamant
// does not implement (after the fields have been read into `config`).
struct NemoKeySpec {
  std::string path;
  std::function<void(const YAML::Node& value, const std::string& where, const TrainConfig& config)> check;
};
const std::vector<NemoKeySpec>& nemo_keys();
const NemoKeySpec* find_nemo_key(std::string_view path);

// True for a path that holds keys: trainer, model, model.optim, exp_manager.ema, ...
bool is_section(std::string_view path);

// "; did you mean 'model.optim.lr'?" or, without a close match, the valid keys of
// the closest existing section.
std::string key_suggestion(std::string_view unknown_path);

}  // namespace adamant::train::detail
