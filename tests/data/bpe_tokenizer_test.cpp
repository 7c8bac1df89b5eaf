// BpeTokenizer against independent implementations: gpt-tokenizer@4.0.0's test plans,
// gpt-3-encoder@1.1.4 (tokenizer_js_vectors.inc, Moby-Dick's token count) and, for
// the merging itself, GPT-2's quadratic bpe() loop written out below over strings.
#include "adamant/data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "adamant/core/error.h"
#include "support/test_data.h"

namespace adamant::data {
namespace {

using namespace std::literals;
using Ids = std::vector<std::int32_t>;

const BpeTokenizer& gpt2() {
  static const BpeTokenizer tokenizer = BpeTokenizer::load_dir(testing::data_dir() / "gpt2");
  return tokenizer;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void write_file(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// Message of the adamant::Error that `load` throws, or "" if it throws none.
template <typename Load>
std::string load_error(Load load) {
  try {
    load();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(BpeTokenizer, EncodesHelloAsOneToken) {
  EXPECT_EQ(gpt2().encode("hello"), (Ids{31373}));
  EXPECT_EQ(gpt2().decode(Ids{31373}), "hello");
  EXPECT_EQ(gpt2().vocab_size(), 50257u);
  EXPECT_EQ(gpt2().eod(), 50256);
}

struct TestPlan {
  std::string sample;
  Ids expected;
};

// Blocks of "EncodingName: <name>", "Sample: <text>", "Encoded: [ids]" separated
// by blank lines; every sample of the file fits on one line.
std::vector<TestPlan> read_test_plans(const std::filesystem::path& path, std::string_view encoding) {
  std::istringstream lines(read_file(path));
  std::vector<TestPlan> plans;
  std::string name_line, sample_line, encoded_line;
  while (std::getline(lines, name_line)) {
    if (name_line.empty()) continue;
    EXPECT_TRUE(std::getline(lines, sample_line) && std::getline(lines, encoded_line));
    EXPECT_TRUE(name_line.starts_with("EncodingName: ") && sample_line.starts_with("Sample: ") &&
                encoded_line.starts_with("Encoded: [") && encoded_line.ends_with("]"))
        << name_line << " / " << sample_line << " / " << encoded_line;
    if (name_line.substr("EncodingName: "sv.size()) != encoding) continue;
    TestPlan plan{sample_line.substr("Sample: "sv.size()), {}};
    std::string numbers = encoded_line.substr("Encoded: ["sv.size());
    numbers.pop_back();
    std::replace(numbers.begin(), numbers.end(), ',', ' ');
    std::istringstream ids(numbers);
    for (std::int32_t id; ids >> id;) plan.expected.push_back(id);
    plans.push_back(std::move(plan));
  }
  return plans;
}

TEST(BpeTokenizer, MatchesGptTokenizerTestPlans) {
  const auto plans = read_test_plans(testing::data_dir() / "gpt-tokenizer" / "TestPlans.txt", "r50k_base");
  ASSERT_EQ(plans.size(), 64u);  // the r50k_base blocks of gpt-tokenizer@4.0.0
  for (const TestPlan& plan : plans) {
    const Ids ids = gpt2().encode(plan.sample);
    EXPECT_EQ(ids, plan.expected) << plan.sample;
    EXPECT_EQ(gpt2().decode(ids), plan.sample);
  }
}

struct JsVector {
  std::string_view text;
  bool allow_special;
  Ids expected;
  std::string_view what;
};

// Produced by `node tests/data/tokenizer_make_vectors.js /tmp/gpt-3-encoder/package`
// from gpt-3-encoder@1.1.4; see that script for the two inputs whose split follows
// Python's \s (U+0085, U+FEFF) instead of JavaScript's.
const std::vector<JsVector>& js_vectors() {
  static const std::vector<JsVector> vectors = {
#include "tokenizer_js_vectors.inc"
  };
  return vectors;
}

TEST(BpeTokenizer, MatchesGpt3EncoderVectors) {
  ASSERT_GE(js_vectors().size(), 50u);
  for (const JsVector& vector : js_vectors()) {
    const Ids ids = gpt2().encode(vector.text, vector.allow_special);
    EXPECT_EQ(ids, vector.expected) << vector.what;
    EXPECT_EQ(gpt2().decode(ids), vector.text) << vector.what;
  }
}

TEST(BpeTokenizer, EndOfTextIsSpecialOnlyWhenAllowed) {
  EXPECT_EQ(gpt2().encode("<|endoftext|>", true), (Ids{50256}));
  const Ids plain = gpt2().encode("<|endoftext|>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
  EXPECT_EQ(gpt2().decode(plain), "<|endoftext|>");
  EXPECT_EQ(gpt2().decode(Ids{31373, 50256}), "hello<|endoftext|>");
}

TEST(BpeTokenizer, DecodeRejectsIdsOutsideVocabulary) {
  EXPECT_THROW(gpt2().decode(Ids{31373, 50257}), Error);
  EXPECT_THROW(gpt2().decode(Ids{-1}), Error);
  const std::string message = load_error([] { gpt2().decode(Ids{1, 2, 70000}); });
  EXPECT_NE(message.find("70000"), std::string::npos) << message;
  EXPECT_NE(message.find("position 2"), std::string::npos) << message;
}

TEST(BpeTokenizer, MissingFilesNameTheFileAndTheFix) {
  const auto dir = testing::temp_dir("tokenizer-missing");
  const auto vocab = testing::data_dir() / "gpt2" / "vocab.bpe";
  std::string message = load_error([&] { BpeTokenizer::load(dir / "encoder.json", vocab); });
  EXPECT_NE(message.find((dir / "encoder.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("scripts/fetch_data.sh"), std::string::npos) << message;
  message = load_error([&] { BpeTokenizer::load_dir(dir); });
  EXPECT_NE(message.find("encoder.json"), std::string::npos) << message;
  // A folder where the file belongs (model.tokenizer.vocab_file: .cache/data/gpt2).
  message = load_error([&] { BpeTokenizer::load(testing::data_dir() / "gpt2", vocab); });
  EXPECT_NE(message.find("is a folder"), std::string::npos) << message;
  EXPECT_NE(message.find("encoder.json"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
}

TEST(BpeTokenizer, MalformedFilesNameTheFileAndTheProblem) {
  const auto dir = testing::temp_dir("tokenizer-malformed");
  const auto encoder = testing::data_dir() / "gpt2" / "encoder.json";
  const auto vocab = testing::data_dir() / "gpt2" / "vocab.bpe";
  const auto bad_json = dir / "bad.json";
  const auto bad_bpe = dir / "bad.bpe";
  const auto expect_error = [](auto load, std::string_view file, std::string_view problem) {
    const std::string message = load_error(load);
    EXPECT_NE(message.find(file), std::string::npos) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << message;
  };
  const auto load_json = [&] { BpeTokenizer::load(bad_json, vocab); };
  const auto load_bpe = [&] { BpeTokenizer::load(encoder, bad_bpe); };

  write_file(bad_json, "{\"a\": 0,");
  expect_error(load_json, bad_json.string(), "not valid JSON");
  write_file(bad_json, "[1, 2]");
  expect_error(load_json, bad_json.string(), "JSON object");
  write_file(bad_json, "{\"a\": \"zero\"}");
  expect_error(load_json, bad_json.string(), "not an integer");
  write_file(bad_json, "{\"a\": 0, \"b\": 0}");
  expect_error(load_json, bad_json.string(), "given to both");
  write_file(bad_json, "{\"a\": 0, \"b\": 5}");
  expect_error(load_json, bad_json.string(), "outside 0..1");
  write_file(bad_json, "{\"a b\": 0}");  // a raw space is not in the byte alphabet (it is written U+0120)
  expect_error(load_json, bad_json.string(), "byte alphabet");
  write_file(bad_json, "{\"a\": 0}");
  expect_error(load_json, bad_json.string(), "no token for byte 0x00");

  write_file(bad_bpe, "h e\n");
  expect_error(load_bpe, bad_bpe.string(), "#version");
  write_file(bad_bpe, "#version: 0.2\nh e\nh e l\n");
  expect_error(load_bpe, bad_bpe.string(), "line 3");
  write_file(bad_bpe, "#version: 0.2\nq \xc4\xa0\n");  // "q" + "Ġ" is no GPT-2 token
  expect_error(load_bpe, bad_bpe.string(), "must come from the same tokenizer");
  write_file(bad_bpe, "#version: 0.2\nhe l\nh e\n");  // "he" used on line 2, created on line 3
  expect_error(load_bpe, bad_bpe.string(), "line 2 uses the token 'he' that the merge on line 3 creates");
  std::filesystem::remove_all(dir);
}

// GPT-2's bpe() as published: merge every occurrence of the lowest-ranked pair, left
// to right, until none merges; over byte-alphabet strings, here ASCII letters and
// digits, which the alphabet maps to themselves.
std::vector<std::string> reference_bpe(std::string_view word,
                                       const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> symbols;
  for (const char c : word) symbols.emplace_back(1, c);
  while (symbols.size() > 1) {
    const std::pair<std::string, std::string>* best = nullptr;
    int best_rank = 0;
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pairs.emplace_back(symbols[i], symbols[i + 1]);
    for (const auto& pair : pairs) {
      const auto found = ranks.find(pair);
      if (found != ranks.end() && (best == nullptr || found->second < best_rank)) {
        best = &pair;
        best_rank = found->second;
      }
    }
    if (best == nullptr) break;
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == best->first && symbols[i + 1] == best->second) {
        merged.push_back(symbols[i] + symbols[i + 1]);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

TEST(BpeTokenizer, MergesLikeGpt2ReferenceLoop) {
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::istringstream lines(read_file(testing::data_dir() / "gpt2" / "vocab.bpe"));
  std::string line;
  std::getline(lines, line);  // #version
  for (int rank = 0; std::getline(lines, line); ++rank) {
    const std::size_t space = line.find(' ');
    if (space != std::string::npos) ranks.emplace(std::pair(line.substr(0, space), line.substr(space + 1)), rank);
  }
  const auto encoder = nlohmann::json::parse(read_file(testing::data_dir() / "gpt2" / "encoder.json"));

  // Words of one class are one pre-token, so encode() is bpe() of the whole word.
  // Small alphabets make repeated and overlapping pairs, where merge order matters.
  std::mt19937 random(20240611);
  const std::vector<std::string_view> alphabets = {"ab", "aeinrst", "eo", "0123456789", "01", "lmnop"};
  for (int trial = 0; trial < 600; ++trial) {
    const std::string_view alphabet = alphabets[trial % alphabets.size()];
    std::string word(1 + random() % 48, ' ');
    for (char& c : word) c = alphabet[random() % alphabet.size()];
    Ids expected;
    for (const std::string& symbol : reference_bpe(word, ranks)) expected.push_back(encoder.at(symbol).get<int>());
    EXPECT_EQ(gpt2().encode(word), expected) << word;
  }
}

TEST(BpeTokenizer, InvalidUtf8BytesAreSymbolsAndRoundTrip) {
  const auto encoder = nlohmann::json::parse(read_file(testing::data_dir() / "gpt2" / "encoder.json"));
  const std::int32_t byte_ff = encoder.at("\xc3\xbf").get<int>();  // byte 0xFF is written 'ÿ'
  EXPECT_EQ(gpt2().encode("\xff"), (Ids{byte_ff}));
  // An invalid byte splits words like a symbol (U+FFFD's class) would.
  const auto concat = [](std::initializer_list<Ids> parts) {
    Ids all;
    for (const Ids& part : parts) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  EXPECT_EQ(gpt2().encode("hello\xffworld"), concat({gpt2().encode("hello"), {byte_ff}, gpt2().encode("world")}));
  EXPECT_EQ(gpt2().encode("a\xff b"), concat({gpt2().encode("a"), {byte_ff}, gpt2().encode(" b")}));

  std::mt19937 random(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes(random() % 40, '\0');
    for (char& byte : bytes) {
      // Mostly bytes that start or continue UTF-8 sequences, so that truncated,
      // overlong and surrogate sequences all occur.
      const unsigned pick = random() % 4;
      byte = static_cast<char>(pick == 0 ? random() % 128 : pick == 1 ? 0x80 + random() % 64 : 0xC0 + random() % 64);
    }
    EXPECT_EQ(gpt2().decode(gpt2().encode(bytes)), bytes);
    EXPECT_EQ(gpt2().decode(gpt2().encode(bytes, true)), bytes);
  }
}

TEST(BpeTokenizer, ConcurrentEncodesAgree) {
  const std::string text = read_file(testing::data_dir() / "moby-dick" / "moby-dick.txt").substr(0, 200'000);
  const BpeTokenizer fresh = BpeTokenizer::load_dir(testing::data_dir() / "gpt2");  // empty cache
  const Ids expected = gpt2().encode(text);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] { results[t] = fresh.encode(text); });
  }
  for (auto& thread : threads) thread.join();
  for (const Ids& result : results) EXPECT_EQ(result, expected);
}

TEST(BpeTokenizer, EncodesMobyDickLikeGpt3Encoder) {
  const std::string text = read_file(testing::data_dir() / "moby-dick" / "moby-dick.txt");
  const Ids ids = gpt2().encode(text);
  // From gpt-3-encoder@1.1.4: node tests/data/tokenizer_make_vectors.js /tmp/gpt-3-encoder/package --count
  //   .cache/data/moby-dick/moby-dick.txt
  constexpr std::size_t kMobyDickTokens = 317756;
  constexpr std::int64_t kMobyDickIdSum = 1388278114;
  EXPECT_EQ(ids.size(), kMobyDickTokens);
  EXPECT_EQ(std::accumulate(ids.begin(), ids.end(), std::int64_t{0}), kMobyDickIdSum);
  EXPECT_EQ(gpt2().decode(ids), text);
}

}  // namespace
}  // namespace adamant::data
