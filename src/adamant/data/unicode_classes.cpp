#include "adamant/data/unicode_classes.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace adamant::data {
namespace {

#include "adamant/data/unicode_tables.inc"

constexpr CharClass classify_by_search(char32_t code_point) {
  // First range whose last >= code_point; the code point is in it if first <= code_point.
  const auto* range = std::lower_bound(std::begin(kCodePointRanges), std::end(kCodePointRanges), code_point,
                                       [](const CodePointRange& r, char32_t cp) { return r.last < cp; });
  if (range != std::end(kCodePointRanges) && range->first <= code_point) return range->char_class;
  return CharClass::kOther;
}

// ASCII dominates real text; a direct table skips the search for it.
constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> classes{};
  for (char32_t cp = 0; cp < 128; ++cp) classes[cp] = classify_by_search(cp);
  return classes;
}

constexpr std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

static_assert(kAsciiClasses[U'a'] == CharClass::kLetter && kAsciiClasses[U'7'] == CharClass::kNumber &&
                  kAsciiClasses[U'\t'] == CharClass::kWhitespace && kAsciiClasses[U'\''] == CharClass::kOther &&
                  kAsciiClasses[0x1C] == CharClass::kOther,
              "unicode_tables.inc is inconsistent with ASCII");

}  // namespace

CharClass classify_code_point(char32_t code_point) {
  if (code_point < 128) return kAsciiClasses[code_point];
  return classify_by_search(code_point);
}

const char* unicode_tables_version() { return kUnicodeTablesVersion; }

}  // namespace adamant::data
