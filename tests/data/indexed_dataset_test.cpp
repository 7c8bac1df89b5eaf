// The Megatron mmap indexed format: files assembled byte by byte from the published
// layout must read back, the writer must round-trip, and damage must be reported.
#include "adamant/data/indexed_dataset.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "support/test_data.h"

namespace adamant::data {
namespace {

namespace fs = std::filesystem;

// Little-endian byte writer, independent of the library's writer.
struct Bytes {
  std::vector<unsigned char> data;
  void raw(std::string_view text) { data.insert(data.end(), text.begin(), text.end()); }
  void unsigned_le(std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) data.push_back(static_cast<unsigned char>((value >> (8 * i)) & 0xff));
  }
  void signed_le(std::int64_t value, int width) { unsigned_le(static_cast<std::uint64_t>(value), width); }
};

void write_file(const fs::path& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<unsigned char> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Three sequences in two documents, uint16 tokens: {7, 50256}, {1, 2, 3}, {65535}; documents [0,2) and [2,3).
struct HandMadeDataset {
  std::vector<std::vector<std::int32_t>> sequences{{7, 50256}, {1, 2, 3}, {65535}};
  Bytes idx, bin;
  HandMadeDataset() {
    for (const auto& sequence : sequences) {
      for (const auto token : sequence) bin.unsigned_le(static_cast<std::uint64_t>(token), 2);
    }
    idx.raw(std::string_view("MMIDIDX\0\0", 9));
    idx.unsigned_le(1, 8);  // version
    idx.unsigned_le(8, 1);  // dtype code 8 = uint16
    idx.unsigned_le(3, 8);  // sequences
    idx.unsigned_le(3, 8);  // document index entries: 0, 2, 3
    for (const auto size : {2, 3, 1}) idx.signed_le(size, 4);
    for (const auto pointer : {0, 4, 10}) idx.signed_le(pointer, 8);
    for (const auto doc : {0, 2, 3}) idx.signed_le(doc, 8);
  }
  void write(const fs::path& prefix) const {
    write_file(index_file_path(prefix), idx.data);
    write_file(data_file_path(prefix), bin.data);
  }
};

class IndexedDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = adamant::testing::temp_dir("indexed"); }
  adamant::testing::TempDir dir_;  // removed with the fixture
};

// The error message for `prefix` must mention `file` and the fix.
void expect_open_error(const fs::path& prefix, const fs::path& file, const std::string& defect) {
  try {
    IndexedDataset::open(prefix);
    FAIL() << "opening " << prefix << " should fail (" << defect << ")";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    EXPECT_NE(message.find(defect), std::string::npos) << message;
    EXPECT_NE(message.find("adamant preprocess"), std::string::npos) << message;
  }
}

TEST_F(IndexedDatasetTest, ReadsFileBuiltByteByByteFromPublishedLayout) {
  const HandMadeDataset reference;
  const auto prefix = dir_ / "hand.made";  // a dot in the prefix must not be taken for an extension
  reference.write(prefix);
  const auto dataset = IndexedDataset::open(prefix);
  EXPECT_EQ(dataset.dtype(), TokenDtype::u16);
  ASSERT_EQ(dataset.num_sequences(), 3u);
  EXPECT_EQ(dataset.num_documents(), 2u);
  EXPECT_EQ(dataset.num_tokens(), 6);
  EXPECT_EQ(std::vector<std::int64_t>(dataset.document_index().begin(), dataset.document_index().end()),
            (std::vector<std::int64_t>{0, 2, 3}));
  EXPECT_EQ(std::vector<std::int64_t>(dataset.pointers().begin(), dataset.pointers().end()),
            (std::vector<std::int64_t>{0, 4, 10}));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(dataset.sequence(i), reference.sequences[i]) << "sequence " << i;
  std::vector<std::int32_t> middle(2);
  dataset.read_tokens(1, 1, middle);
  EXPECT_EQ(middle, (std::vector<std::int32_t>{2, 3}));
  EXPECT_THROW(dataset.read_tokens(1, 2, middle), Error);
}

TEST_F(IndexedDatasetTest, WriterProducesThePublishedBytes) {
  const HandMadeDataset reference;
  const auto prefix = dir_ / "written";
  {
    IndexedDatasetBuilder builder(prefix, TokenDtype::u16);
    builder.add_sequence(reference.sequences[0]);
    builder.add_sequence(reference.sequences[1]);
    builder.end_document();
    builder.add_document(reference.sequences[2]);
    builder.finalize();
  }
  EXPECT_EQ(read_file(index_file_path(prefix)), reference.idx.data);
  EXPECT_EQ(read_file(data_file_path(prefix)), reference.bin.data);
  EXPECT_FALSE(fs::exists(prefix.string() + ".bin.tmp"));
}

TEST_F(IndexedDatasetTest, RoundTripsEveryIntegerDtype) {
  const std::vector<std::vector<std::int32_t>> documents{{0, 1, 2, 3}, {}, {100}, {5, 4, 3, 2, 1, 0, 126}};
  for (const auto dtype :
       {TokenDtype::u8, TokenDtype::i8, TokenDtype::i16, TokenDtype::u16, TokenDtype::i32, TokenDtype::i64}) {
    const auto prefix = dir_ / ("roundtrip_" + std::string(token_dtype_name(dtype)));
    IndexedDatasetBuilder builder(prefix, dtype);
    for (const auto& document : documents) builder.add_document(document);
    builder.finalize();
    const auto dataset = IndexedDataset::open(prefix);
    EXPECT_EQ(dataset.dtype(), dtype);
    ASSERT_EQ(dataset.num_sequences(), documents.size());
    EXPECT_EQ(fs::file_size(data_file_path(prefix)), 12 * token_dtype_size(dtype));
    for (std::size_t i = 0; i < documents.size(); ++i) EXPECT_EQ(dataset.sequence(i), documents[i]);
  }
}

TEST_F(IndexedDatasetTest, WriterRejectsTokensOutsideTheDtype) {
  IndexedDatasetBuilder builder(dir_ / "narrow", TokenDtype::u16);
  const std::vector<std::int32_t> too_large{65536};
  EXPECT_THROW(builder.add_document(too_large), Error);
}

TEST_F(IndexedDatasetTest, AbandonedWriterLeavesNoFiles) {
  {
    IndexedDatasetBuilder builder(dir_ / "abandoned", TokenDtype::i32);
    const std::vector<std::int32_t> tokens{1, 2};
    builder.add_document(tokens);
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(IndexedDatasetTest, BestFittingDtypeFollowsMegatron) {
  EXPECT_EQ(best_fitting_token_dtype(50257), TokenDtype::u16);
  EXPECT_EQ(best_fitting_token_dtype(65499), TokenDtype::u16);
  EXPECT_EQ(best_fitting_token_dtype(65500), TokenDtype::i32);
}

TEST_F(IndexedDatasetTest, TruncatedIndexIsReported) {
  const HandMadeDataset reference;
  const auto prefix = dir_ / "cut_idx";
  reference.write(prefix);
  const auto& bytes = reference.idx.data;
  write_file(index_file_path(prefix), {bytes.begin(), bytes.end() - 5});
  expect_open_error(prefix, index_file_path(prefix), "truncated");
  write_file(index_file_path(prefix), {bytes.begin(), bytes.begin() + 20});  // inside the header
  expect_open_error(prefix, index_file_path(prefix), "truncated");
}

TEST_F(IndexedDatasetTest, TruncatedDataIsReported) {
  const HandMadeDataset reference;
  const auto prefix = dir_ / "cut_bin";
  reference.write(prefix);
  const auto& bytes = reference.bin.data;
  write_file(data_file_path(prefix), {bytes.begin(), bytes.end() - 1});
  expect_open_error(prefix, data_file_path(prefix), "truncated");
}

TEST_F(IndexedDatasetTest, BadMagicIsReported) {
  HandMadeDataset reference;
  reference.idx.data[0] = 'X';
  const auto prefix = dir_ / "magic";
  reference.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "magic");
}

TEST_F(IndexedDatasetTest, BadVersionIsReported) {
  HandMadeDataset reference;
  reference.idx.data[9] = 2;
  const auto prefix = dir_ / "version";
  reference.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "version 2");
}

TEST_F(IndexedDatasetTest, BadDtypeIsReported) {
  HandMadeDataset reference;
  reference.idx.data[17] = 9;
  const auto prefix = dir_ / "dtype";
  reference.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "dtype code 9");
  reference.idx.data[17] = 7;  // float32: a valid code, but not tokens
  reference.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "float32");
}

TEST_F(IndexedDatasetTest, CorruptDocumentIndexAndPointersAreReported) {
  HandMadeDataset reference;
  const std::size_t doc_index_at = 34 + 3 * 4 + 3 * 8;
  reference.idx.data[doc_index_at + 8] = 4;  // second entry 4 > 3 sequences
  const auto prefix = dir_ / "docs";
  reference.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "document index");

  HandMadeDataset bad_size;
  bad_size.idx.data[34 + 4 + 3] = 0x80;  // second size becomes negative
  bad_size.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "negative size");
}

// Damage that keeps every count in range: only the chain of pointers (each sequence starts where
// the one before ends, the last ends at the end of the .bin) shows it.
TEST_F(IndexedDatasetTest, WrongDtypeByteAndFlippedSizeBitsAreReported) {
  const auto prefix = dir_ / "chain";
  HandMadeDataset uint8_byte;
  uint8_byte.idx.data[17] = 1;  // says uint8; the data is uint16
  uint8_byte.write(prefix);
  expect_open_error(prefix, index_file_path(prefix), "dtype byte (uint8)");

  const std::size_t sizes_at = 34;
  for (const std::size_t sequence : {0, 1}) {  // 2 -> 3 and 3 -> 2: the next pointer no longer follows
    HandMadeDataset flipped;
    flipped.idx.data[sizes_at + 4 * sequence] ^= 1;
    flipped.write(prefix);
    expect_open_error(prefix, index_file_path(prefix), "damaged sequence size");
  }
  HandMadeDataset last;  // 1 -> 0: every pointer follows, but the data goes on past the last sequence
  last.idx.data[sizes_at + 8] ^= 1;
  last.write(prefix);
  expect_open_error(prefix, data_file_path(prefix), "do not belong together");
  HandMadeDataset intact;
  intact.write(prefix);
  EXPECT_EQ(IndexedDataset::open(prefix).num_tokens(), 6);
}

TEST_F(IndexedDatasetTest, MissingFilesNameThePath) {
  const auto prefix = dir_ / "absent";
  try {
    IndexedDataset::open(prefix);
    FAIL() << "a missing dataset must throw";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(index_file_path(prefix).string()), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace adamant::data
