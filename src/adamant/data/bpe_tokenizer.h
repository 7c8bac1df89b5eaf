#pragma once
// GPT-2 / GPT-3 byte-level BPE tokenizer (encoder.json + vocab.bpe).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace adamant::data {

class BpeTokenizer {
 public:
  static constexpr std::int32_t kEndOfText = 50256;  // <|endoftext|>

  // Reads encoder.json and vocab.bpe; a missing or malformed file throws adamant::Error naming it.
  static BpeTokenizer load(const std::filesystem::path& encoder_json, const std::filesystem::path& vocab_bpe);
  // Loads <dir>/encoder.json and <dir>/vocab.bpe.
  static BpeTokenizer load_dir(const std::filesystem::path& dir);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Exact GPT-2 encoding of UTF-8 text. "<|endoftext|>" in the text is encoded as
  // plain text unless allow_special, in which case it becomes kEndOfText.
  std::vector<std::int32_t> encode(std::string_view text, bool allow_special = false) const;
  // Bytes of the tokens; ids outside the vocabulary throw adamant::Error.
  std::string decode(std::span<const std::int32_t> ids) const;
  std::size_t vocab_size() const;  // 50257
  std::int32_t eod() const { return kEndOfText; }

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace adamant::data
