#pragma once
// GPT-2's byte-level alphabet ("bytes_to_unicode"): every byte maps to a printable
// code point so that BPE tokens in encoder.json / vocab.bpe are printable strings.
// Bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map to themselves; the other 68
// bytes, in increasing order, map to U+0100, U+0101, ...
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace adamant::data {

// The code point standing for `byte`.
char32_t byte_to_code_point(std::uint8_t byte);

// The byte a code point stands for, or nullopt if it is not in the alphabet.
std::optional<std::uint8_t> code_point_to_byte(char32_t code_point);

// Raw bytes of a token written in the alphabet (UTF-8), or nullopt if the text is
// not valid UTF-8 or holds a code point outside the alphabet.
std::optional<std::string> alphabet_text_to_bytes(std::string_view token_text);

}  // namespace adamant::data
