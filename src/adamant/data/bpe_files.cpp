#include "adamant/data/bpe_files.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>

#include "adamant/core/error.h"
#include "adamant/core/file_read.h"
#include "adamant/data/bpe_byte_alphabet.h"

namespace adamant::data {
namespace {

std::string read_whole_file(const std::filesystem::path& path, std::string_view what) {
  if (!std::filesystem::exists(path)) {
    fail(
        "BPE tokenizer: {} '{}' does not exist; run scripts/fetch_data.sh to fetch GPT-2's encoder.json and "
        "vocab.bpe, or point the tokenizer at the folder that holds them",
        what, path.string());
  }
  if (std::filesystem::is_directory(path)) {
    fail("BPE tokenizer: {} '{}' is a folder; point it at the file itself (e.g. {}/{})", what, path.string(),
         path.string(), what == "encoder file" ? "encoder.json" : "vocab.bpe");
  }
  return read_text_file(path, what);
}

}  // namespace

std::vector<std::string> read_bpe_encoder_json(const std::filesystem::path& path) {
  const std::string text = read_whole_file(path, "encoder file");
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  constexpr std::string_view kExpected = "expected GPT-2's encoder.json, a JSON object mapping each token to its id";
  if (json.is_discarded()) fail("BPE tokenizer: '{}' is not valid JSON; {}", path.string(), kExpected);
  if (!json.is_object() || json.empty())
    fail("BPE tokenizer: '{}' is not a non-empty JSON object; {}", path.string(), kExpected);

  std::vector<std::optional<std::string>> tokens_by_id(json.size());
  std::vector<std::string> token_texts(json.size());  // for messages about duplicate ids
  for (const auto& item : json.items()) {
    const std::string& token_text = item.key();
    const nlohmann::json& id_json = item.value();
    if (!id_json.is_number_integer()) {
      fail("BPE tokenizer: '{}': token '{}' has id {}, not an integer; {}", path.string(), token_text, id_json.dump(),
           kExpected);
    }
    const auto id = id_json.get<std::int64_t>();
    if (id < 0 || static_cast<std::size_t>(id) >= json.size()) {
      fail("BPE tokenizer: '{}': token '{}' has id {}, outside 0..{}; ids must number the {} tokens from 0",
           path.string(), token_text, id, json.size() - 1, json.size());
    }
    std::optional<std::string> bytes = alphabet_text_to_bytes(token_text);
    if (!bytes) {
      fail("BPE tokenizer: '{}': token '{}' has characters outside GPT-2's byte alphabet; {}", path.string(),
           token_text, kExpected);
    }
    if (tokens_by_id[id]) {
      fail("BPE tokenizer: '{}': id {} is given to both '{}' and '{}'; every token needs its own id", path.string(), id,
           token_texts[id], token_text);
    }
    tokens_by_id[id] = std::move(bytes);
    token_texts[id] = token_text;
  }
  // n distinct ids in 0..n-1 cover every id, so each entry is set.
  std::vector<std::string> tokens;
  tokens.reserve(tokens_by_id.size());
  for (auto& token : tokens_by_id) tokens.push_back(std::move(*token));
  return tokens;
}

std::vector<BpeMergeLine> read_bpe_merges(const std::filesystem::path& path) {
  const std::string text = read_whole_file(path, "merges file");
  constexpr std::string_view kExpected =
      "expected GPT-2's vocab.bpe: a '#version' line, then one merge 'left right' per line";
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line) || !line.starts_with("#version")) {
    fail("BPE tokenizer: '{}' does not start with a '#version' line; {}", path.string(), kExpected);
  }
  std::vector<BpeMergeLine> merges;
  for (std::size_t line_number = 2; std::getline(lines, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    if (space == 0 || space == std::string::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      fail("BPE tokenizer: '{}' line {}: '{}' is not two tokens separated by one space; {}", path.string(), line_number,
           line, kExpected);
    }
    std::optional<std::string> left = alphabet_text_to_bytes(std::string_view(line).substr(0, space));
    std::optional<std::string> right = alphabet_text_to_bytes(std::string_view(line).substr(space + 1));
    if (!left || !right) {
      fail("BPE tokenizer: '{}' line {}: '{}' has characters outside GPT-2's byte alphabet; {}", path.string(),
           line_number, line, kExpected);
    }
    merges.push_back({std::move(*left), std::move(*right), line_number});
  }
  if (merges.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    fail("BPE tokenizer: '{}' has {} merges, more than ids can count", path.string(), merges.size());
  }
  return merges;
}

}  // namespace adamant::data
