#pragma once
// Text decoded token by token: a byte-level BPE token may end inside a multi-byte UTF-8
// character, so the bytes of a character are held back until the token that completes it.
#include <string>
#include <string_view>

namespace adamant::data {

// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence: a
// trailing lead byte and its continuation bytes, fewer than the lead announces, are left out.
// Invalid bytes count as complete (they are passed on as they are).
std::size_t complete_utf8_prefix(std::string_view bytes);

class Utf8Stream {
 public:
  // Adds a token's bytes; returns what is now printable (whole characters).
  std::string push(std::string_view bytes);
  // What is still held back at the end of the text (an incomplete character), emptied.
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace adamant::data
