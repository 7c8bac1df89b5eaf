#include "adamant/data/bpe_pretokenizer.h"

#include "adamant/data/unicode_classes.h"
#include "adamant/data/unicode_utf8.h"

namespace adamant::data {
namespace {

struct Unit {
  CharClass char_class;
  std::size_t length;
};

Unit unit_at(std::string_view text, std::size_t pos) {
  const Utf8Unit unit = decode_utf8_unit(text, pos);
  return {unit.valid ? classify_code_point(unit.code_point) : CharClass::kOther, unit.length};
}

// Length of the contraction 's 't 're 've 'm 'll 'd at `pos` (an apostrophe), or 0.
// Case-sensitive, as in GPT-2: "'S" is not a contraction.
std::size_t contraction_length(std::string_view text, std::size_t pos) {
  const std::string_view rest = text.substr(pos + 1);
  for (const std::string_view suffix : {"re", "ve", "ll"}) {
    if (rest.starts_with(suffix)) return 3;
  }
  if (!rest.empty() && std::string_view("stmd").find(rest.front()) != std::string_view::npos) return 2;
  return 0;
}

// End of the maximal run of units of one class starting at `pos`.
std::size_t run_end(std::string_view text, std::size_t pos, CharClass char_class) {
  while (pos < text.size()) {
    const Unit unit = unit_at(text, pos);
    if (unit.char_class != char_class) break;
    pos += unit.length;
  }
  return pos;
}

}  // namespace

std::size_t pretoken_end(std::string_view text, std::size_t begin) {
  // Alternatives 1-7: contractions.
  if (text[begin] == '\'') {
    if (const std::size_t length = contraction_length(text, begin); length > 0) return begin + length;
  }
  // Alternatives 8-10: " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional
  // space, then a maximal run of one class.
  CharClass char_class = unit_at(text, begin).char_class;
  std::size_t body = begin;
  if (text[begin] == ' ' && begin + 1 < text.size()) {
    const Unit next = unit_at(text, begin + 1);
    if (next.char_class != CharClass::kWhitespace) {
      body = begin + 1;
      char_class = next.char_class;
    }
  }
  if (char_class != CharClass::kWhitespace) return run_end(text, body, char_class);

  // Alternatives 11-12: "\s+(?!\S)|\s+". The greedy run backs off by one unit when
  // a non-space follows, leaving that last space to prefix the next word; a run of
  // one unit before a non-space is matched by the plain "\s+".
  std::size_t pos = begin;
  std::size_t last_unit_start = begin;
  while (pos < text.size()) {
    const Unit unit = unit_at(text, pos);
    if (unit.char_class != CharClass::kWhitespace) break;
    last_unit_start = pos;
    pos += unit.length;
  }
  if (pos == text.size()) return pos;
  return last_unit_start > begin ? last_unit_start : pos;
}

}  // namespace adamant::data
