#pragma once
// The Unicode classes GPT-2's pre-tokenization regex tells apart: \p{L}, \p{N},
// \s (the White_Space property, as the Python `regex` module matches it) and the rest.
// Tables come from tools/gen_unicode_tables.py (unicode_tables.inc).
#include <cstdint>

namespace adamant::data {

enum class CharClass : std::uint8_t { kOther, kLetter, kNumber, kWhitespace };

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
  CharClass char_class;
};

// Class of a Unicode scalar value; values outside Unicode are kOther.
CharClass classify_code_point(char32_t code_point);

// The Unicode version the tables were generated from, e.g. "15.1.0".
const char* unicode_tables_version();

}  // namespace adamant::data
