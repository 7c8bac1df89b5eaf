#include "adamant/data/utf8_stream.h"

#include <gtest/gtest.h>

namespace adamant::data {
namespace {

TEST(Utf8Stream, CompletePrefix) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);             // first byte of "é"
  EXPECT_EQ(complete_utf8_prefix("a\xC3\xA9"), 3u);         // "é" complete
  EXPECT_EQ(complete_utf8_prefix("\xE2\x80"), 0u);          // two of the three bytes of "—"
  EXPECT_EQ(complete_utf8_prefix("x\xE2\x80\x94"), 4u);     // "—" complete
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x90"), 0u);      // three of the four bytes of an emoji
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x90\xB3"), 4u);  // the whole emoji
  EXPECT_EQ(complete_utf8_prefix("a\x80\x80"), 3u);         // stray continuation bytes pass on
}

TEST(Utf8Stream, HoldsBackSplitCharacters) {
  Utf8Stream stream;
  // "whale 🐳—" split inside both multi-byte characters, as byte-level tokens may split them.
  std::string out = stream.push("wha");
  out += stream.push("le \xF0\x9F");
  EXPECT_EQ(out, "whale ");
  out += stream.push("\x90");
  EXPECT_EQ(out, "whale ");
  out += stream.push("\xB3\xE2\x80");
  EXPECT_EQ(out, "whale \xF0\x9F\x90\xB3");
  out += stream.push("\x94");
  EXPECT_EQ(out, "whale \xF0\x9F\x90\xB3\xE2\x80\x94");
  EXPECT_EQ(stream.finish(), "");
  EXPECT_EQ(stream.push("\xE2\x80"), "");
  EXPECT_EQ(stream.finish(), "\xE2\x80");  // an unfinished character at the end is given back as it is
}

}  // namespace
}  // namespace adamant::data
