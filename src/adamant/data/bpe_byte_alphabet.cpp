#include "adamant/data/bpe_byte_alphabet.h"

#include <array>

#include "adamant/data/unicode_utf8.h"

namespace adamant::data {
namespace {

constexpr bool maps_to_itself(unsigned byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

constexpr std::array<char32_t, 256> make_byte_to_code_point() {
  std::array<char32_t, 256> table{};
  char32_t next_shifted = 256;
  for (unsigned byte = 0; byte < 256; ++byte) table[byte] = maps_to_itself(byte) ? byte : next_shifted++;
  return table;
}

constexpr std::array<char32_t, 256> kByteToCodePoint = make_byte_to_code_point();
constexpr char32_t kAlphabetEnd = 256 + 68;  // one past the largest code point used

constexpr std::array<std::int16_t, kAlphabetEnd> make_code_point_to_byte() {
  std::array<std::int16_t, kAlphabetEnd> table{};
  for (auto& entry : table) entry = -1;
  for (unsigned byte = 0; byte < 256; ++byte) table[kByteToCodePoint[byte]] = static_cast<std::int16_t>(byte);
  return table;
}

constexpr std::array<std::int16_t, kAlphabetEnd> kCodePointToByte = make_code_point_to_byte();

static_assert(kByteToCodePoint[' '] == 0x120 && kByteToCodePoint['\n'] == 0x10A && kByteToCodePoint[0xAD] == 0x143,
              "GPT-2 maps space to U+0120 ('Ġ'), newline to U+010A ('Ċ') and 0xAD last");

}  // namespace

char32_t byte_to_code_point(std::uint8_t byte) { return kByteToCodePoint[byte]; }

std::optional<std::uint8_t> code_point_to_byte(char32_t code_point) {
  if (code_point >= kAlphabetEnd || kCodePointToByte[code_point] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kCodePointToByte[code_point]);
}

std::optional<std::string> alphabet_text_to_bytes(std::string_view token_text) {
  std::string bytes;
  bytes.reserve(token_text.size());
  for (std::size_t pos = 0; pos < token_text.size();) {
    const Utf8Unit unit = decode_utf8_unit(token_text, pos);
    if (!unit.valid) return std::nullopt;
    const std::optional<std::uint8_t> byte = code_point_to_byte(unit.code_point);
    if (!byte) return std::nullopt;
    bytes.push_back(static_cast<char>(*byte));
    pos += unit.length;
  }
  return bytes;
}

}  // namespace adamant::data
