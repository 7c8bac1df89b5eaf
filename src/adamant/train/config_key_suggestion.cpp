// Sections of the key schema and did-you-mean suggestions for unknown keys.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "adamant/train/config_document.h"
#include "adamant/train/config_schema.h"

namespace adamant::train::detail {
namespace {

std::string parent_of(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string() : std::string(path.substr(0, dot));
}

std::string leaf_of(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  return std::string(dot == std::string_view::npos ? path : path.substr(dot + 1));
}

// Every key Adamant knows: fields first (preferred in suggestions), then NeMo keys, then sections.
std::vector<std::string> known_paths() {
  std::vector<std::string> paths;
  std::set<std::string> sections;
  auto add = [&](const std::string& path) {
    paths.push_back(path);
    for (std::string parent = parent_of(path); !parent.empty(); parent = parent_of(parent)) sections.insert(parent);
  };
  for (const auto& field : config_fields()) add(field.path);
  for (const auto& key : nemo_keys()) add(key.path);
  paths.insert(paths.end(), sections.begin(), sections.end());
  return paths;
}

// Edit distance counting an adjacent transposition as one edit (optmi -> optim),
// as typos usually are (optimal string alignment distance).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// "lr" abbreviates "learning_rate" (initials), "eps" abbreviates "epsilon" (prefix).
bool abbreviates(std::string_view shorter, std::string_view longer) {
  if (shorter.size() < 2 || shorter.size() >= longer.size()) return false;
  if (longer.starts_with(shorter)) return true;
  std::string initials(1, longer[0]);
  for (std::size_t i = 1; i < longer.size(); ++i) {
    if (longer[i - 1] == '_') initials += longer[i];
  }
  return initials == shorter;
}

}  // namespace

bool is_section(std::string_view path) {
  const std::string prefix = std::string(path) + ".";
  auto under = [&](const std::string& key) { return key.starts_with(prefix); };
  return std::any_of(config_fields().begin(), config_fields().end(),
                     [&](const FieldSpec& field) { return under(field.path); }) ||
         std::any_of(nemo_keys().begin(), nemo_keys().end(), [&](const NemoKeySpec& key) { return under(key.path); });
}

std::string key_suggestion(std::string_view unknown_path) {
  const std::vector<std::string> known = known_paths();
  const std::string parent = parent_of(unknown_path);
  const std::string leaf = leaf_of(unknown_path);
  auto suggest = [](const std::string& path) { return fmt::format("; did you mean '{}'?", path); };

  // 1. A small typo among the keys of the same section.
  const std::string* best = nullptr;
  std::size_t best_distance = std::max<std::size_t>(1, leaf.size() / 3) + 1;
  for (const auto& path : known) {
    if (parent_of(path) != parent) continue;
    const std::size_t distance = edit_distance(leaf, leaf_of(path));
    if (distance < best_distance) {
      best = &path;
      best_distance = distance;
    }
  }
  if (best != nullptr) return suggest(*best);
  // 2. The right name in the wrong section (trainer.micro_batch_size -> model.micro_batch_size).
  for (const auto& path : known) {
    if (leaf_of(path) == leaf) return suggest(path);
  }
  // 3. An abbreviation or spelled-out form (learning_rate -> lr, epsilon -> eps).
  for (const auto& path : known) {
    if (parent_of(path) != parent) continue;
    const std::string other = leaf_of(path);
    if (abbreviates(other, leaf) || abbreviates(leaf, other)) return suggest(path);
  }
  // 4. A typo anywhere in the path (a misspelt section: model.optmi.lr -> model.optim.lr).
  best_distance = std::max<std::size_t>(1, unknown_path.size() / 8) + 1;
  for (const auto& path : known) {
    const std::size_t distance = edit_distance(unknown_path, path);
    if (distance < best_distance) {
      best = &path;
      best_distance = distance;
    }
  }
  if (best != nullptr) return suggest(*best);
  // 5. No close match: list what the section holds (the keys Adamant acts on).
  std::vector<std::string> siblings;
  for (const auto& field : config_fields()) {
    if (parent_of(field.path) == parent) siblings.push_back(leaf_of(field.path));
  }
  for (const auto& path : known) {
    if (parent_of(path) == parent && is_section(path)) siblings.push_back(leaf_of(path));
  }
  if (siblings.empty()) return "";
  return fmt::format("; valid keys under {} are: {}", parent.empty() ? "the top level" : parent,
                     fmt::join(siblings, ", "));
}

}  // namespace adamant::train::detail
