#pragma once
// The raw YAML tree of a training config before it is typed into TrainConfig:
// loading with syntax errors that name the file, Hydra-style `key=value`
// overrides, dotted-path lookup, where a value came from (file line or override)
// and resolution of OmegaConf `${path}` interpolations.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace adamant::train::detail {

// "a.b.c" -> {"a", "b", "c"}; empty components are kept so callers can reject them.
std::vector<std::string> split_path(std::string_view dotted);
// True for dotted paths of identifiers ([A-Za-z_][A-Za-z0-9_]*), e.g. model.optim.lr.
bool is_valid_path(std::string_view dotted);
// The value of `key` in a mapping node; nullopt when absent or when `map` is not a mapping.
std::optional<YAML::Node> find_child(const YAML::Node& map, std::string_view key);

// One command-line override: `model.optim.lr=3e-4`, `+key=value` (Hydra's add form).
struct Override {
  std::string path;
  YAML::Node value;
  std::string text;  // as typed, for messages
};
Override parse_override(std::string_view text);

class ConfigDocument {
 public:
  // Called for a `${path}` that names a key absent from the document; returns the
  // key's default as a YAML node, or nullopt when the key is unknown.
  using DefaultLookup = std::function<std::optional<YAML::Node>(std::string_view path)>;

  ConfigDocument(const std::string& yaml_text, std::string source_name);

  // Replaces (or adds) the value at override.path, creating mappings on the way.
  void apply(const Override& override_value);
  void set_default_lookup(DefaultLookup lookup) { default_lookup_ = std::move(lookup); }

  const YAML::Node& root() const { return root_; }
  const std::string& source_name() const { return source_name_; }

  // The value at a dotted path as written (interpolations unresolved), or nullopt.
  std::optional<YAML::Node> raw(std::string_view path) const;
  // The value with every `${...}` resolved, or nullopt when the key is absent.
  std::optional<YAML::Node> resolved(std::string_view path) const;
  // " (in file.yaml, line 12)" or " (from override 'model.optim.lr=3e-4')".
  std::string where(std::string_view path) const;

 private:
  YAML::Node resolve_node(const std::string& path, const YAML::Node& node, std::vector<std::string>& stack) const;
  YAML::Node resolve_reference(const std::string& path, const std::string& reference,
                               std::vector<std::string>& stack) const;
  std::string absolute_reference(const std::string& path, const std::string& reference) const;

  // Counts a value produced by resolution; throws once the document has produced too many.
  void count_expanded(const std::string& path, std::size_t values) const;

  YAML::Node root_;
  std::string source_name_;
  // Resolution is memoised per referenced path (a reference used many times resolves once),
  // and bounded: YAML aliases and references can name a value exponentially often.
  struct ResolvedReference {
    YAML::Node value;
    std::size_t values = 0;  // what resolving it expanded: each use counts that again
  };
  mutable std::map<std::string, ResolvedReference, std::less<>> resolved_references_;
  mutable std::size_t expanded_values_ = 0;
  std::map<std::string, std::string, std::less<>> override_text_;  // override path -> text
  DefaultLookup default_lookup_;
};

}  // namespace adamant::train::detail
