#pragma once
// Strict UTF-8 decoding of one unit (Unicode Table 3-7, well-formed byte sequences).
// A byte that does not start a well-formed sequence is reported as an invalid unit of
// length 1, so callers can keep going byte by byte and never read past the text.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace adamant::data {

struct Utf8Unit {
  char32_t code_point;  // 0 for an invalid unit
  std::uint8_t length;  // bytes consumed: 1..4
  bool valid;
};

inline Utf8Unit decode_utf8_unit(std::string_view text, std::size_t pos) {
  const auto byte_at = [&](std::size_t i) -> unsigned { return static_cast<unsigned char>(text[i]); };
  const unsigned lead = byte_at(pos);
  if (lead < 0x80) return {lead, 1, true};
  constexpr Utf8Unit kInvalid{0, 1, false};
  std::size_t length = 0;
  unsigned second_low = 0x80;  // allowed range of the second byte (excludes overlongs and surrogates)
  unsigned second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return kInvalid;
  }
  if (pos + length > text.size()) return kInvalid;
  const unsigned second = byte_at(pos + 1);
  if (second < second_low || second > second_high) return kInvalid;
  char32_t code_point = lead & (0xFFu >> (length + 1));
  code_point = (code_point << 6) | (second & 0x3F);
  for (std::size_t i = 2; i < length; ++i) {
    const unsigned next = byte_at(pos + i);
    if ((next & 0xC0) != 0x80) return kInvalid;
    code_point = (code_point << 6) | (next & 0x3F);
  }
  return {code_point, static_cast<std::uint8_t>(length), true};
}

}  // namespace adamant::data
