// GPT sample indexing: numpy-identical shuffles, Megatron's split and index arrays
// (reference vectors computed with numpy 1.24 from Megatron's published algorithm),
// and samples checked against a plain walk over the concatenated token stream.
#include "adamant/data/gpt_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/dataset_split.h"
#include "adamant/data/indexed_dataset.h"
#include "adamant/data/shuffle.h"
#include "support/test_data.h"

namespace adamant::data {
namespace {

namespace fs = std::filesystem;

// numpy: r = np.random.RandomState(seed); a = np.arange(n); r.shuffle(a)
TEST(ShuffleRng, MatchesNumpyRandomStateShuffle) {
  std::vector<int> ten(10);
  std::iota(ten.begin(), ten.end(), 0);
  ShuffleRng(1234).shuffle(std::span<int>(ten));
  EXPECT_EQ(ten, (std::vector<int>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));

  std::vector<std::int64_t> twenty(20);
  std::iota(twenty.begin(), twenty.end(), 0);
  ShuffleRng(7).shuffle(std::span<std::int64_t>(twenty));
  EXPECT_EQ(twenty, (std::vector<std::int64_t>{1, 17, 2, 5, 11, 0, 18, 6, 13, 19, 10, 14, 8, 16, 9, 12, 7, 3, 4, 15}));

  std::vector<std::int32_t> large(100000);
  std::iota(large.begin(), large.end(), 0);
  ShuffleRng(0).shuffle(std::span<std::int32_t>(large));
  EXPECT_EQ(std::vector<std::int32_t>(large.begin(), large.begin() + 8),
            (std::vector<std::int32_t>{3582, 60498, 53227, 21333, 3885, 51521, 84261, 10685}));
  std::uint64_t checksum = 0;  // sum of i * a[i] mod 1e9+7
  for (std::size_t i = 0; i < large.size(); ++i) {
    checksum = (checksum + i * static_cast<std::uint64_t>(large[i])) % 1000000007ULL;
  }
  EXPECT_EQ(checksum, 371179754u);
}

// Python: Megatron's get_train_valid_test_split_ on the same inputs.
TEST(SplitDocuments, MatchesMegatronSemantics) {
  const auto bounds = [](std::string_view splits, std::size_t n) {
    const auto ranges = split_documents(splits, n);
    EXPECT_EQ(ranges[0].begin, 0u);
    EXPECT_EQ(ranges[0].end, ranges[1].begin);
    EXPECT_EQ(ranges[1].end, ranges[2].begin);
    return std::vector<std::size_t>{ranges[0].begin, ranges[1].begin, ranges[2].begin, ranges[2].end};
  };
  EXPECT_EQ(bounds("969,30,1", 1000), (std::vector<std::size_t>{0, 969, 999, 1000}));
  EXPECT_EQ(bounds("1,1,1", 10), (std::vector<std::size_t>{0, 4, 7, 10}));
  EXPECT_EQ(bounds("98/2/0", 7), (std::vector<std::size_t>{0, 7, 7, 7}));
  EXPECT_EQ(bounds("1,1", 5), (std::vector<std::size_t>{0, 3, 5, 5}));  // halves round to even
  EXPECT_EQ(bounds("100", 4), (std::vector<std::size_t>{0, 4, 4, 4}));
  EXPECT_EQ(bounds("2,1,1", 1), (std::vector<std::size_t>{0, 1, 1, 1}));
  EXPECT_THROW(split_documents("9x,1", 10), Error);
  EXPECT_THROW(split_documents("0,0,0", 10), Error);
  try {
    split_documents("a,b", 3);
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("model.data.splits_string"), std::string::npos);
  }
}

class GptDatasetTest : public ::testing::Test {
 protected:
  // Document d holds tokens 100*d + 0, 100*d + 1, ...: every token tells where it came from.
  void SetUp() override {
    dir_ = adamant::testing::temp_dir("gptdataset");
    write_dataset(dir_ / "small", {5, 3, 8, 1, 12, 7, 4, 9, 2, 6});
  }

  std::shared_ptr<const IndexedDataset> write_dataset(const fs::path& prefix, const std::vector<int>& sizes) {
    IndexedDatasetBuilder builder(prefix, TokenDtype::i32);
    for (std::size_t d = 0; d < sizes.size(); ++d) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(sizes[d]));
      for (int t = 0; t < sizes[d]; ++t) tokens[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(100 * d + t);
      builder.add_document(tokens);
    }
    builder.finalize();
    data_ = std::make_shared<const IndexedDataset>(IndexedDataset::open(prefix));
    return data_;
  }

  GptDataset make(std::int64_t num_samples, std::uint32_t seed, DocumentRange range = {0, 10}, int seq = 4,
                  const fs::path& cache = {}) const {
    GptDatasetOptions options;
    options.documents = range;
    options.seq_length = seq;
    options.num_samples = num_samples;
    options.seed = seed;
    options.index_cache_dir = cache;
    return GptDataset(data_, options);
  }

  std::vector<std::int32_t> sample(const GptDataset& dataset, std::int64_t i) const {
    std::vector<std::int32_t> out(static_cast<std::size_t>(dataset.seq_length()) + 1);
    dataset.read_sample(i, out);
    return out;
  }

  adamant::testing::TempDir dir_;  // removed with the fixture
  std::shared_ptr<const IndexedDataset> data_;
};

TEST_F(GptDatasetTest, FarMoreSamplesThanTheDataHoldsIsAClearError) {
  // 57 tokens per epoch, samples of 4: 4e10 samples would need ~3e9 epochs of index.
  try {
    make(40'000'000'000, 1234);
    FAIL() << "an index of many GiB was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("trainer.max_steps"), std::string::npos) << message;
    EXPECT_NE(message.find("larger corpus"), std::string::npos) << message;
  }
}

template <typename T>
std::vector<T> copy_of(std::span<const T> values) {
  return {values.begin(), values.end()};
}

void expect_same_index(const GptDataset& a, const GptDataset& b) {
  EXPECT_EQ(copy_of(a.document_order()), copy_of(b.document_order()));
  ASSERT_EQ(a.sample_starts().size(), b.sample_starts().size());
  for (std::size_t i = 0; i < a.sample_starts().size(); ++i) {
    EXPECT_EQ(a.sample_starts()[i].document_position, b.sample_starts()[i].document_position) << i;
    EXPECT_EQ(a.sample_starts()[i].offset, b.sample_starts()[i].offset) << i;
  }
  EXPECT_EQ(copy_of(a.shuffle_order()), copy_of(b.shuffle_order()));
  EXPECT_EQ(a.num_epochs(), b.num_epochs());
}

TEST_F(GptDatasetTest, IndexCacheIsWrittenOnceThenMapped) {
  const fs::path cache = dir_ / "index maps";
  const GptDataset built = make(30, 1234);
  const GptDataset first = make(30, 1234, {0, 10}, 4, cache);
  EXPECT_FALSE(first.loaded_from_cache());
  const GptDataset second = make(30, 1234, {0, 10}, 4, cache);
  EXPECT_TRUE(second.loaded_from_cache());
  expect_same_index(second, built);
  EXPECT_EQ(sample(second, 7), sample(built, 7));
  EXPECT_TRUE(fs::exists(cache / "small_train_indexmap_30ns_4sl_1234s_0-10d.adidx"));
  // Another seed, sample count or split is another file, never a stale one.
  EXPECT_FALSE(make(30, 99, {0, 10}, 4, cache).loaded_from_cache());
  EXPECT_FALSE(make(31, 1234, {0, 10}, 4, cache).loaded_from_cache());
  EXPECT_FALSE(make(30, 1234, {0, 8}, 4, cache).loaded_from_cache());
}

// Fills freed heap blocks of the sizes the index arrays use with `pattern`, so that any byte
// a writer forgets to set (struct padding) comes out different in the next build.
void scribble_on_freed_heap(unsigned char pattern) {
  std::vector<std::vector<unsigned char>> blocks;
  for (const std::size_t size : {128, 256, 512, 1024, 2048, 4096}) {
    for (int i = 0; i < 16; ++i) blocks.emplace_back(size, pattern);
  }
}

std::vector<char> file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(GptDatasetTest, IndexCacheFilesAreByteIdenticalAcrossBuilds) {
  const std::string name = "small_train_indexmap_30ns_4sl_1234s_0-10d.adidx";
  scribble_on_freed_heap(0xab);
  make(30, 1234, {0, 10}, 4, dir_ / "first");
  scribble_on_freed_heap(0xcd);
  make(30, 1234, {0, 10}, 4, dir_ / "second");
  const std::vector<char> first = file_bytes(dir_ / "first" / name);
  const std::vector<char> second = file_bytes(dir_ / "second" / name);
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(first.size(), second.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < first.size(); ++i) differing += first[i] != second[i] ? 1 : 0;
  EXPECT_EQ(differing, 0u) << "of " << first.size() << " bytes";
}

TEST_F(GptDatasetTest, DamagedOrStaleIndexCacheIsRebuilt) {
  const fs::path cache = dir_ / "cache";
  const GptDataset built = make(30, 1234);
  make(30, 1234, {0, 10}, 4, cache);
  const fs::path file = cache / "small_train_indexmap_30ns_4sl_1234s_0-10d.adidx";
  {  // one flipped byte inside the arrays
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 12));
    const char byte = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 12));
    f.put(static_cast<char>(byte ^ 0x40));
  }
  const GptDataset repaired = make(30, 1234, {0, 10}, 4, cache);
  EXPECT_FALSE(repaired.loaded_from_cache());
  expect_same_index(repaired, built);
  EXPECT_TRUE(make(30, 1234, {0, 10}, 4, cache).loaded_from_cache());  // rewritten whole

  // The same name over other data (re-preprocessed documents): the sizes checksum differs.
  write_dataset(dir_ / "small", {5, 3, 8, 1, 12, 7, 4, 9, 2, 7});
  const GptDataset other = make(30, 1234, {0, 10}, 4, cache);
  EXPECT_FALSE(other.loaded_from_cache());
  EXPECT_EQ(other.tokens_per_epoch(), 58);
}

TEST_F(GptDatasetTest, UnwritableIndexCacheNamesTheKey) {
  std::ofstream(dir_ / "blocker") << "x";  // a file where the cache folder should be
  try {
    make(30, 1234, {0, 10}, 4, dir_ / "blocker");
    FAIL() << "an index cache inside a file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.data.index_mapping_dir"), std::string::npos) << e.what();
  }
}

// Reference: Megatron's _build_index_mappings in numpy for sizes {5,3,8,1,12,7,4,9,2,6}, seq 4, seed 1234.
TEST_F(GptDatasetTest, IndexArraysMatchMegatronWithSeparateLastEpoch) {
  const auto dataset = make(30, 1234);  // 3 epochs; the last gives 2 < 80% of 14 samples: shuffled apart
  EXPECT_EQ(dataset.num_epochs(), 3);
  EXPECT_EQ(dataset.tokens_per_epoch(), 57);
  const auto order = dataset.document_order();
  EXPECT_EQ(std::vector<std::int32_t>(order.begin(), order.end()),
            (std::vector<std::int32_t>{3, 3, 2, 6, 4, 5, 4, 0, 8, 8, 7, 1, 0, 9, 7,
                                       1, 9, 2, 6, 5, 8, 1, 7, 6, 9, 5, 4, 3, 0, 2}));
  const std::vector<std::int64_t> positions{0,  2,  2,  3,  4,  4,  4,  5,  5,  6,  6,  6,  7,  9,  10,
                                            10, 11, 12, 13, 13, 14, 14, 15, 16, 17, 17, 18, 19, 19, 21,
                                            22, 22, 23, 24, 24, 25, 25, 26, 26, 26, 28, 29, 29};
  const std::vector<std::int32_t> offsets{0, 2, 6, 2, 2, 6, 10, 2, 6, 3, 7, 11, 3, 0, 2, 6, 1, 2,  1, 5, 3, 7,
                                          2, 3, 1, 5, 1, 1, 5,  0, 1, 5, 0, 0,  4, 2, 6, 3, 7, 11, 2, 1, 5};
  ASSERT_EQ(dataset.sample_starts().size(), positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i) {
    EXPECT_EQ(dataset.sample_starts()[i].document_position, positions[i]) << i;
    EXPECT_EQ(dataset.sample_starts()[i].offset, offsets[i]) << i;
  }
  const auto shuffle = dataset.shuffle_order();
  EXPECT_EQ(
      std::vector<std::int64_t>(shuffle.begin(), shuffle.end()),
      (std::vector<std::int64_t>{8, 20, 14, 24, 6, 25, 4, 5,  13, 18, 27, 15, 17, 10, 22, 21, 23, 1,  12, 19, 2,
                                 3, 16, 26, 9,  0, 11, 7, 31, 41, 29, 30, 34, 35, 38, 39, 36, 28, 32, 40, 37, 33}));
}

TEST_F(GptDatasetTest, ShuffleMatchesMegatronWithoutSeparateLastEpoch) {
  const auto dataset = make(26, 1234);  // 2 epochs; the last gives 12 >= 80% of 14: one global shuffle
  EXPECT_EQ(dataset.num_epochs(), 2);
  EXPECT_EQ(dataset.size(), 28);
  const auto shuffle = dataset.shuffle_order();
  EXPECT_EQ(std::vector<std::int64_t>(shuffle.begin(), shuffle.end()),
            (std::vector<std::int64_t>{8,  14, 23, 19, 24, 4, 25, 21, 10, 27, 1,  13, 22, 20,
                                       17, 26, 9,  0,  11, 7, 3,  6,  2,  5,  12, 16, 18, 15}));
}

TEST_F(GptDatasetTest, SamplesAreWindowsOfTheConcatenatedDocumentStream) {
  for (const int seq : {1, 4, 7, 40}) {
    const auto dataset = make(25, 99, {0, 10}, seq);
    // Reference: concatenate the documents in the dataset's order, then sample k (unshuffled)
    // is tokens [k * seq, k * seq + seq + 1) of that stream.
    std::vector<std::int32_t> stream;
    for (const auto doc : dataset.document_order()) {
      const auto tokens = data_->sequence(static_cast<std::size_t>(doc));
      stream.insert(stream.end(), tokens.begin(), tokens.end());
    }
    ASSERT_GE(dataset.size(), 25);
    EXPECT_EQ(dataset.size(), (static_cast<std::int64_t>(stream.size()) - 1) / seq);
    for (std::int64_t i = 0; i < dataset.size(); ++i) {
      const auto unshuffled = dataset.shuffle_order()[static_cast<std::size_t>(i)];
      const auto begin = stream.begin() + unshuffled * seq;
      const std::vector<std::int32_t> expected(begin, begin + seq + 1);
      EXPECT_EQ(sample(dataset, i), expected) << "seq " << seq << " sample " << i;
    }
  }
}

TEST_F(GptDatasetTest, EpochsUseEveryDocumentEquallyOften) {
  // 3 epochs with a separate last one: the first two are shuffled together, the last alone.
  const auto dataset = make(30, 5);
  ASSERT_EQ(dataset.num_epochs(), 3);
  const auto order = dataset.document_order();
  ASSERT_EQ(order.size(), 30u);
  const std::multiset<std::int32_t> first_two(order.begin(), order.begin() + 20);
  const std::multiset<std::int32_t> last(order.begin() + 20, order.end());
  for (std::int32_t doc = 0; doc < 10; ++doc) {
    EXPECT_EQ(first_two.count(doc), 2u) << "document " << doc;
    EXPECT_EQ(last.count(doc), 1u) << "document " << doc;
  }
  std::vector<std::int64_t> shuffle(dataset.shuffle_order().begin(), dataset.shuffle_order().end());
  std::sort(shuffle.begin(), shuffle.end());
  for (std::size_t i = 0; i < shuffle.size(); ++i) EXPECT_EQ(shuffle[i], static_cast<std::int64_t>(i));
}

TEST_F(GptDatasetTest, DeterministicForASeedAndDifferentForAnother) {
  const auto first = make(40, 1234);
  const auto again = make(40, 1234);
  const auto other = make(40, 4321);
  ASSERT_EQ(first.size(), again.size());
  bool any_difference = false;
  for (std::int64_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(sample(first, i), sample(again, i));
    any_difference = any_difference || sample(first, i) != sample(other, i);
  }
  EXPECT_TRUE(any_difference);
}

TEST_F(GptDatasetTest, SplitsPartitionTheDocuments) {
  const auto ranges = split_documents("6,3,1", data_->num_sequences());
  std::set<std::int32_t> seen;
  std::size_t covered = 0;
  for (std::size_t split = 0; split < 3; ++split) {
    ASSERT_FALSE(ranges[split].empty());
    const auto dataset = make(10, 1234, ranges[split]);
    std::set<std::int32_t> documents;
    for (std::int64_t i = 0; i < dataset.size(); ++i) {
      // Tokens encode their document (token / 100): every sample stays inside the split.
      for (const auto token : sample(dataset, i)) documents.insert(token / 100);
    }
    for (const auto doc : documents) {
      EXPECT_GE(doc, static_cast<std::int32_t>(ranges[split].begin));
      EXPECT_LT(doc, static_cast<std::int32_t>(ranges[split].end));
      EXPECT_TRUE(seen.insert(doc).second) << "document " << doc << " in two splits";
    }
    covered += ranges[split].size();
  }
  EXPECT_EQ(covered, data_->num_sequences());
  EXPECT_EQ(seen.size(), data_->num_sequences());
}

TEST_F(GptDatasetTest, RejectsImpossibleRequests) {
  EXPECT_THROW(make(10, 1, {3, 3}), Error);      // empty split
  EXPECT_THROW(make(10, 1, {0, 11}), Error);     // beyond the data
  EXPECT_THROW(make(10, 1, {0, 10}, 0), Error);  // seq_length 0
  std::vector<std::int32_t> too_small(4);
  const auto dataset = make(10, 1);
  EXPECT_THROW(dataset.read_sample(0, too_small), Error);
  std::vector<std::int32_t> right(5);
  EXPECT_THROW(dataset.read_sample(dataset.size(), right), Error);
}

}  // namespace
}  // namespace adamant::data
