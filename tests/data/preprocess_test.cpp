// `adamant preprocess` end to end: tokens equal BpeTokenizer::encode(text) + EOD per
// document, and the output does not depend on the thread count or batch size.
#include "adamant/data/preprocess.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/data/indexed_dataset.h"
#include "adamant/data/progress_meter.h"
#include "support/test_data.h"

namespace adamant::data {
namespace {

namespace fs = std::filesystem;

std::vector<unsigned char> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

class PreprocessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = adamant::testing::temp_dir("preprocess");
    vocab_dir_ = adamant::testing::data_dir() / "gpt2";
    tokenizer_ = std::make_unique<BpeTokenizer>(BpeTokenizer::load_dir(vocab_dir_));
    for (int i = 0; i < 60; ++i) {
      texts_.push_back("Document " + std::to_string(i) + ": Call me Ishmael. Some years ago, never mind how long" +
                       std::string(static_cast<std::size_t>(i % 7), '!') + " caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 " +
                       (i % 5 == 0 ? "<|endoftext|> stays text" : "whale") + "\n  indented\tline " +
                       std::to_string(i * 7919));
    }
  }

  fs::path write_jsonl(const std::string& name, const std::string& key, bool with_extras) {
    std::string content;
    for (std::size_t i = 0; i < texts_.size(); ++i) {
      nlohmann::json line{{key, texts_[i]}, {"id", i}};
      content += line.dump() + "\n";
      if (with_extras && i == 10) content += "\n   \n";                    // blank lines are skipped
      if (with_extras && i == 20) content += "{\"" + key + "\": \"\"}\n";  // empty text is skipped
    }
    const auto path = dir_ / name;
    write_text(path, content);
    return path;
  }

  PreprocessOptions options(const fs::path& input, const std::string& output, int workers) const {
    PreprocessOptions result;
    result.input = input;
    result.output_prefix = dir_ / output;
    result.vocab_dir = vocab_dir_;
    result.workers = workers;
    return result;
  }

  std::vector<std::int32_t> expected_tokens(const std::string& text, bool eod = true) const {
    auto tokens = tokenizer_->encode(text);
    if (eod) tokens.push_back(50256);
    return tokens;
  }

  adamant::testing::TempDir dir_;  // removed with the fixture
  fs::path vocab_dir_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  std::vector<std::string> texts_;
};

TEST_F(PreprocessTest, JsonlTokensAreEncodePlusEodAndThreadCountDoesNotMatter) {
  const auto input = write_jsonl("corpus.jsonl", "text", true);
  const auto single = preprocess(options(input, "single", 1));
  auto threaded_options = options(input, "threaded", 4);
  threaded_options.batch_bytes = 700;  // many batches: order must survive batch boundaries too
  const auto threaded = preprocess(threaded_options);

  EXPECT_EQ(single.dataset_prefix, dir_ / "single_text_document");
  EXPECT_EQ(single.documents, static_cast<std::int64_t>(texts_.size()));
  EXPECT_EQ(single.skipped_empty_documents, 1);
  EXPECT_EQ(read_file(data_file_path(single.dataset_prefix)), read_file(data_file_path(threaded.dataset_prefix)));
  EXPECT_EQ(read_file(index_file_path(single.dataset_prefix)), read_file(index_file_path(threaded.dataset_prefix)));

  const auto dataset = IndexedDataset::open(single.dataset_prefix);
  EXPECT_EQ(dataset.dtype(), TokenDtype::u16);
  ASSERT_EQ(dataset.num_sequences(), texts_.size());
  EXPECT_EQ(dataset.num_documents(), texts_.size());
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < texts_.size(); ++i) {
    EXPECT_EQ(dataset.sequence(i), expected_tokens(texts_[i])) << "document " << i;
    tokens += static_cast<std::int64_t>(dataset.sequence(i).size());
  }
  EXPECT_EQ(single.tokens, tokens);
}

TEST_F(PreprocessTest, CustomJsonKeyNamesTheOutputAndEodCanBeOmitted) {
  const auto input = write_jsonl("content.jsonl", "content", false);
  auto opts = options(input, "custom", 2);
  opts.json_key = "content";
  opts.append_eod = false;
  const auto result = preprocess(opts);
  EXPECT_EQ(result.dataset_prefix, dir_ / "custom_content_document");
  const auto dataset = IndexedDataset::open(result.dataset_prefix);
  ASSERT_EQ(dataset.num_sequences(), texts_.size());
  for (std::size_t i = 0; i < texts_.size(); ++i) EXPECT_EQ(dataset.sequence(i), expected_tokens(texts_[i], false));
}

TEST_F(PreprocessTest, TextIsOneDocumentOrOneDocumentPerParagraph) {
  const auto corpus_path = adamant::testing::data_dir() / "moby-dick" / "moby-dick.txt";
  std::string corpus;
  {
    std::ifstream in(corpus_path, std::ios::binary);
    corpus.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(corpus.size(), 60000u) << corpus_path;
  corpus.resize(60000);
  const auto input = dir_ / "moby.txt";
  write_text(input, corpus);

  const auto whole = preprocess(options(input, "whole", 2));
  const auto whole_dataset = IndexedDataset::open(whole.dataset_prefix);
  ASSERT_EQ(whole_dataset.num_sequences(), 1u);
  EXPECT_EQ(whole_dataset.sequence(0), expected_tokens(corpus));

  // Reference split: paragraphs are runs of lines that are not blank, joined by '\n'.
  std::vector<std::string> paragraphs;
  std::string current;
  std::size_t start = 0;
  while (start < corpus.size()) {
    std::size_t stop = corpus.find('\n', start);
    if (stop == std::string::npos) stop = corpus.size();
    const std::string line = corpus.substr(start, stop - start);
    start = stop + 1;
    if (line.find_first_not_of(" \t\r\f\v") == std::string::npos) {
      if (!current.empty()) paragraphs.push_back(current);
      current.clear();
    } else {
      current += (current.empty() ? "" : "\n") + line;
    }
  }
  if (!current.empty()) paragraphs.push_back(current);
  ASSERT_GT(paragraphs.size(), 50u);

  auto split_options = options(input, "paragraphs", 3);
  split_options.split_paragraphs = true;
  split_options.batch_bytes = 1000;  // paragraphs straddle batch boundaries
  const auto split = preprocess(split_options);
  const auto split_dataset = IndexedDataset::open(split.dataset_prefix);
  ASSERT_EQ(split_dataset.num_sequences(), paragraphs.size());
  for (std::size_t i = 0; i < paragraphs.size(); ++i) {
    EXPECT_EQ(split_dataset.sequence(i), expected_tokens(paragraphs[i])) << "paragraph " << i;
  }
}

// The call must throw adamant::Error whose message contains every fragment.
void expect_error(const PreprocessOptions& options, const std::vector<std::string>& fragments) {
  try {
    preprocess(options);
    FAIL() << "preprocess should have failed";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const auto& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

TEST_F(PreprocessTest, BadInputsGiveClearErrors) {
  expect_error(options(dir_ / "missing.jsonl", "out", 1), {"missing.jsonl", "--input"});

  const auto malformed = dir_ / "malformed.jsonl";
  write_text(malformed, "{\"text\": \"fine\"}\n{\"text\": \"also fine\"}\n{\"text\": broken\n");
  expect_error(options(malformed, "out", 2), {"malformed.jsonl", "line 3", "malformed JSON"});

  const auto keyless = dir_ / "keyless.jsonl";
  write_text(keyless, "{\"text\": \"fine\"}\n{\"body\": \"no text key\"}\n");
  expect_error(options(keyless, "out", 1), {"keyless.jsonl", "line 2", "\"text\"", "--json-key"});

  const auto unknown = dir_ / "corpus.csv";
  write_text(unknown, "a,b\n");
  expect_error(options(unknown, "out", 1), {"corpus.csv", ".jsonl", ".txt"});

  auto no_vocab = options(keyless, "out", 1);
  no_vocab.vocab_dir = dir_ / "no-vocab";
  expect_error(no_vocab, {"no-vocab", "--vocab-dir"});

  // Outputs that cannot be written are user errors naming the place: under a file, or in a
  // folder nobody may create (/proc, which refuses even root, as CI runs).
  const auto good = write_jsonl("good.jsonl", "text", false);
  write_text(dir_ / "a-file", "x");
  auto under_file = options(good, "a-file/sub/out", 1);
  expect_error(under_file, {(dir_ / "a-file" / "sub").string(), "output"});
  auto read_only = options(good, "out", 1);
  read_only.output_prefix = "/proc/adamant-test/out";
  expect_error(read_only, {"/proc/adamant-test"});

  // A failed run leaves no dataset behind.
  EXPECT_FALSE(fs::exists(dir_ / "out_text_document.idx"));
  EXPECT_FALSE(fs::exists(dir_ / "out_text_document.bin.tmp"));
}

TEST(ProgressMeter, FormatsCountsRateAndEta) {
  // 12.5 of 50 MB in 5 s: 2.5 MB/s, 37.5 MB left = 15 s.
  EXPECT_EQ(ProgressMeter::format(1234567, 12'500'000, 50'000'000, 5.0),
            "1,234,567 docs | 12.5/50.0 MB (25.0%) | 2.5 MB/s | ETA 15s");
  EXPECT_EQ(ProgressMeter::format(12, 3'000'000, 0, 2.0), "12 docs | 3.0 MB | 1.5 MB/s");
}

}  // namespace
}  // namespace adamant::data
