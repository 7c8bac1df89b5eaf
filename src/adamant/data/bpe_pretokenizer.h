#pragma once
// GPT-2 splits text into pre-tokens before BPE with the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (Python `regex` module semantics: \s is Unicode White_Space, classes per
// unicode_classes.h). This is that regex written out by hand over UTF-8.
//
// Invalid UTF-8: each byte that does not start a well-formed sequence is a unit of
// its own with class kOther (the class U+FFFD would have), and keeps its byte, so
// encoding never fails and decode(encode(text)) == text for any bytes.
#include <cstddef>
#include <string_view>

namespace adamant::data {

// End (exclusive byte offset) of the pre-token starting at `begin` < text.size().
// Pre-tokens tile the text: the next one starts where this one ends.
std::size_t pretoken_end(std::string_view text, std::size_t begin);

}  // namespace adamant::data
