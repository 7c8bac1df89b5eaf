// The tokenizer's parts: UTF-8 decoding, Unicode classes and the hand-written
// pre-tokenization regex, against expectations from Python's `regex` module
// (GPT-2's pattern, regex.findall) and the Unicode Character Database.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "adamant/data/bpe_byte_alphabet.h"
#include "adamant/data/bpe_pretokenizer.h"
#include "adamant/data/unicode_classes.h"
#include "adamant/data/unicode_utf8.h"

namespace adamant::data {
namespace {

using namespace std::literals;

std::vector<std::string> pretokens(std::string_view text) {
  std::vector<std::string> pieces;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = pretoken_end(text, begin);
    EXPECT_GT(end, begin);
    pieces.emplace_back(text.substr(begin, end - begin));
    begin = end;
  }
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(BpePretokenizer, SplitsLikeGpt2Regex) {
  // Each expectation is regex.findall(GPT-2's pattern, text) with Python's `regex`.
  EXPECT_EQ(pretokens("a  b\n\nc   "), (Pieces{"a", " ", " b", "\n", "\n", "c", "   "}));
  EXPECT_EQ(pretokens("Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(pretokens("x \t\n y"), (Pieces{"x", " \t\n", " y"}));
  EXPECT_EQ(pretokens("don't DON'T 'll''s"), (Pieces{"don", "'t", " DON", "'", "T", " '", "ll", "''", "s"}));
  EXPECT_EQ(pretokens(" 123abc !?x"), (Pieces{" 123", "abc", " !?", "x"}));
  EXPECT_EQ(pretokens("\u00e9t\u00e9 \u0301x"), (Pieces{"\u00e9t\u00e9", " \u0301", "x"}));
  EXPECT_EQ(pretokens("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
  EXPECT_EQ(pretokens("tab\t"), (Pieces{"tab", "\t"}));
  EXPECT_EQ(pretokens(" "), (Pieces{" "}));
  EXPECT_EQ(pretokens("\n a"), (Pieces{"\n", " a"}));
  EXPECT_EQ(pretokens("a\xc2\x85\xc2\x85"
                      "b"),
            (Pieces{"a", "\xc2\x85", "\xc2\x85", "b"}));                         // U+0085 is \s
  EXPECT_EQ(pretokens("x\xef\xbb\xbf y"), (Pieces{"x", "\xef\xbb\xbf", " y"}));  // U+FEFF is not \s ...
  EXPECT_EQ(pretokens("x\xef\xbb\xbf!"), (Pieces{"x", "\xef\xbb\xbf!"}));        // ... but a symbol
}

TEST(BpePretokenizer, InvalidBytesAreSymbols) {
  EXPECT_EQ(pretokens("ab\xff\xfe"
                      "cd"),
            (Pieces{"ab", "\xff\xfe", "cd"}));
  EXPECT_EQ(pretokens("ab \xe2\x82"), (Pieces{"ab", " \xe2\x82"}));      // truncated sequence at the end
  EXPECT_EQ(pretokens("\xed\xa0\x80x"), (Pieces{"\xed\xa0\x80", "x"}));  // an encoded surrogate
}

TEST(Utf8, DecodesWellFormedAndRejectsMalformedSequences) {
  const auto unit = [](std::string_view bytes) { return decode_utf8_unit(bytes, 0); };
  EXPECT_EQ(unit("A").code_point, U'A');
  EXPECT_EQ(unit("\xc3\xa9").code_point, U'\u00e9');
  EXPECT_EQ(unit("\xe2\x82\xac").code_point, U'\u20ac');
  EXPECT_EQ(unit("\xf0\x9f\x98\x80").code_point, U'\U0001F600');
  EXPECT_EQ(unit("\xf4\x8f\xbf\xbf").code_point, U'\U0010FFFF');
  EXPECT_EQ(unit("\xf0\x9f\x98\x80").length, 4);
  for (const std::string_view bad :
       {"\x80"sv, "\xc0\xaf"sv, "\xc1\xbf"sv, "\xe0\x80\xaf"sv, "\xed\xa0\x80"sv, "\xf0\x80\x80\xaf"sv,
        "\xf4\x90\x80\x80"sv, "\xf5\x80\x80\x80"sv, "\xff"sv, "\xe2\x82"sv, "\xe2\x28\xa1"sv}) {
    const Utf8Unit decoded = unit(bad);
    EXPECT_FALSE(decoded.valid) << ::testing::PrintToString(bad);
    EXPECT_EQ(decoded.length, 1);
  }
}

TEST(UnicodeClasses, MatchTheUnicodeCharacterDatabase) {
  EXPECT_EQ(classify_code_point(U'A'), CharClass::kLetter);
  EXPECT_EQ(classify_code_point(U'\u00e9'), CharClass::kLetter);  // Ll
  EXPECT_EQ(classify_code_point(U'\u01c5'), CharClass::kLetter);  // Lt
  EXPECT_EQ(classify_code_point(U'\u02b0'), CharClass::kLetter);  // Lm
  EXPECT_EQ(classify_code_point(U'\u4e2d'), CharClass::kLetter);  // Lo
  EXPECT_EQ(classify_code_point(U'\U0001D518'), CharClass::kLetter);
  EXPECT_EQ(classify_code_point(U'\u0663'), CharClass::kNumber);  // Nd
  EXPECT_EQ(classify_code_point(U'\u216b'), CharClass::kNumber);  // Nl
  EXPECT_EQ(classify_code_point(U'\u00bd'), CharClass::kNumber);  // No
  EXPECT_EQ(classify_code_point(U'\U0001D7D8'), CharClass::kNumber);
  for (const char32_t space : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00a0', U'\u1680', U'\u2000',
                               U'\u200a', U'\u2028', U'\u2029', U'\u202f', U'\u205f', U'\u3000'}) {
    EXPECT_EQ(classify_code_point(space), CharClass::kWhitespace) << static_cast<unsigned>(space);
  }
  for (const char32_t other : {U'\x1c', U'\x1f', U'\'', U'!', U'\u0301', U'\u200b', U'\u200d', U'\ufeff', U'\U0001F600',
                               U'\U0010FFFF', char32_t{0x110000}}) {
    EXPECT_EQ(classify_code_point(other), CharClass::kOther) << static_cast<unsigned>(other);
  }
}

TEST(ByteAlphabet, MapsBytesToPrintableCodePointsAndBack) {
  EXPECT_EQ(byte_to_code_point('A'), U'A');
  EXPECT_EQ(byte_to_code_point(' '), U'\u0120');  // 'Ġ'
  EXPECT_EQ(byte_to_code_point(0), U'\u0100');
  EXPECT_EQ(byte_to_code_point(0xAD), U'\u0143');
  for (unsigned byte = 0; byte < 256; ++byte) {
    EXPECT_EQ(code_point_to_byte(byte_to_code_point(static_cast<std::uint8_t>(byte))), byte);
  }
  EXPECT_FALSE(code_point_to_byte(U' '));  // a raw space is not in the alphabet
  EXPECT_EQ(alphabet_text_to_bytes("\xc4\xa0hello"), " hello");
  EXPECT_FALSE(alphabet_text_to_bytes("a b"));
}

}  // namespace
}  // namespace adamant::data
