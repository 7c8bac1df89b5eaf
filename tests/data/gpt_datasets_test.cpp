// build_gpt_datasets: one prefix split three ways, or several blended by weight,
// checked sample by sample against datasets built by hand from the same pieces.
#include "adamant/data/gpt_datasets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/blended_dataset.h"
#include "adamant/data/dataset_split.h"
#include "adamant/data/gpt_dataset.h"
#include "adamant/data/indexed_dataset.h"
#include "support/test_data.h"

namespace adamant::data {
namespace {

namespace fs = std::filesystem;

// `documents` documents of 3 + (d % 5) tokens; tokens start at `base` so datasets differ.
fs::path write_dataset(const fs::path& prefix, int documents, int base) {
  IndexedDatasetBuilder builder(prefix, TokenDtype::u16);
  for (int d = 0; d < documents; ++d) {
    std::vector<std::int32_t> tokens;
    for (int t = 0; t < 3 + d % 5; ++t) tokens.push_back(base + 10 * d + t);
    builder.add_document(tokens);
  }
  builder.finalize();
  return prefix;
}

std::vector<std::int32_t> read(const SampleSource& source, std::int64_t index) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(source.seq_length()) + 1);
  source.read_sample(index, out);
  return out;
}

TEST(MegatronNumSamples, FollowsNemo) {
  // max_steps 100, val every 25 steps, 4 val batches, 2 test batches, gbs 8.
  EXPECT_EQ(megatron_num_samples(100, 25, 4, 2, 8), (std::array<std::int64_t, 3>{800, (100 / 25 + 1) * 4 * 8, 16}));
  EXPECT_THROW(megatron_num_samples(0, 25, 4, 2, 8), Error);
}

class GptDatasetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = adamant::testing::temp_dir("gptdatasets");
    first_ = write_dataset(dir_ / "first", 40, 0);
    second_ = write_dataset(dir_ / "second", 25, 1000);
  }
  adamant::testing::TempDir dir_;  // removed with the fixture
  fs::path first_, second_;
};

TEST_F(GptDatasetsTest, SinglePrefixIsSplitIntoThreeGptDatasets) {
  GptDatasetsOptions options;
  options.data_prefix = {{1.0, first_}};
  options.splits_string = "8,1,1";
  options.seq_length = 6;
  options.seed = 77;
  options.num_samples = {50, 10, 5};
  const auto datasets = build_gpt_datasets(options);
  const auto indexed = std::make_shared<const IndexedDataset>(IndexedDataset::open(first_));
  const auto ranges = split_documents("8,1,1", 40);
  const std::array<std::shared_ptr<const SampleSource>, 3> built{datasets.train, datasets.valid, datasets.test};
  for (std::size_t split = 0; split < 3; ++split) {
    ASSERT_NE(built[split], nullptr);
    GptDatasetOptions reference_options;
    reference_options.documents = ranges[split];
    reference_options.seq_length = 6;
    reference_options.seed = 77;
    reference_options.num_samples = options.num_samples[split];
    const GptDataset reference(indexed, reference_options);
    ASSERT_EQ(built[split]->size(), reference.size());
    EXPECT_GE(built[split]->size(), options.num_samples[split]);
    for (std::int64_t i = 0; i < reference.size(); ++i) EXPECT_EQ(read(*built[split], i), read(reference, i));
  }
}

TEST_F(GptDatasetsTest, SeveralPrefixesAreBlendedByWeight) {
  GptDatasetsOptions options;
  options.data_prefix = {{3.0, first_}, {1.0, second_}};
  options.splits_string = "100,0,0";
  options.seq_length = 5;
  options.seed = 3;
  options.num_samples = {40, 0, 0};
  const auto datasets = build_gpt_datasets(options);
  EXPECT_EQ(datasets.valid, nullptr);
  EXPECT_EQ(datasets.test, nullptr);
  ASSERT_NE(datasets.train, nullptr);
  EXPECT_EQ(datasets.train->size(), 40);

  // By hand: each source built for ceil(40 * w * 1.005) samples, then blended 0.75 / 0.25.
  std::vector<std::shared_ptr<const SampleSource>> sources;
  const std::vector<fs::path> prefixes{first_, second_};
  const std::vector<double> weights{0.75, 0.25};
  for (std::size_t i = 0; i < 2; ++i) {
    const auto indexed = std::make_shared<const IndexedDataset>(IndexedDataset::open(prefixes[i]));
    GptDatasetOptions source_options;
    source_options.documents = {0, indexed->num_sequences()};
    source_options.seq_length = 5;
    source_options.seed = 3;
    source_options.num_samples = i == 0 ? 31 : 11;
    sources.push_back(std::make_shared<const GptDataset>(indexed, source_options));
  }
  const BlendedDataset reference(sources, weights, 40);
  int from_second = 0;
  for (std::int64_t i = 0; i < 40; ++i) {
    const auto sample = read(*datasets.train, i);
    EXPECT_EQ(sample, read(reference, i)) << i;
    from_second += sample[0] >= 1000 ? 1 : 0;
  }
  EXPECT_EQ(from_second, 10);
}

TEST_F(GptDatasetsTest, MissingPrefixNamesTheFile) {
  GptDatasetsOptions options;
  options.data_prefix = {{1.0, dir_ / "nope"}};
  options.num_samples = {1, 1, 1};
  try {
    build_gpt_datasets(options);
    FAIL() << "a missing prefix must throw";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("nope.idx"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace adamant::data
