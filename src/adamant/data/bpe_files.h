#pragma once
// Readers for GPT-2's tokenizer files. Errors name the file and say what was
// expected; a missing file points at scripts/fetch_data.sh.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace adamant::data {

// encoder.json: a JSON object mapping each token (in GPT-2's byte alphabet) to its
// id; ids must be exactly 0..n-1. Returns the raw bytes of each token, by id.
std::vector<std::string> read_bpe_encoder_json(const std::filesystem::path& path);

struct BpeMergeLine {
  std::string left;  // raw bytes
  std::string right;
  std::size_t line_number;  // 1-based, for messages
};

// vocab.bpe: a "#version" comment line, then one merge "left right" per line in
// rank order (blank lines are skipped).
std::vector<BpeMergeLine> read_bpe_merges(const std::filesystem::path& path);

}  // namespace adamant::data
