// The data-parallel loader against Megatron's MegatronPretrainingSampler order.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/data/data_loader.h"

namespace adamant::data {
namespace {

constexpr int kSeq = 5;

// Sample i = {1000 i, 1000 i + 1, ..., 1000 i + kSeq}: tokens reveal the sample.
class CountingSource final : public SampleSource {
 public:
  explicit CountingSource(std::int64_t size) : size_(size) {}
  std::int64_t size() const override { return size_; }
  int seq_length() const override { return kSeq; }
  void read_sample(std::int64_t index, std::span<std::int32_t> out) const override {
    for (std::size_t t = 0; t < out.size(); ++t) out[t] = static_cast<std::int32_t>(1000 * index + t);
  }

 private:
  std::int64_t size_;
};

struct Row {
  std::int64_t sample;
  std::int64_t step;
  int micro_batch;
  bool operator==(const Row&) const = default;
};

// All rows one rank yields, checking tokens/targets against the sample they claim.
std::vector<Row> drain(DataLoader& loader, std::int64_t max_micro_batches = -1) {
  std::vector<Row> rows;
  for (std::int64_t n = 0; loader.has_next() && n != max_micro_batches; ++n) {
    const MicroBatch& batch = loader.next();
    for (int r = 0; r < batch.micro_batch_size; ++r) {
      const std::int64_t sample = batch.sample_indices[static_cast<std::size_t>(r)];
      for (int t = 0; t < kSeq; ++t) {
        const auto at = static_cast<std::size_t>(r * kSeq + t);
        EXPECT_EQ(batch.tokens[at], 1000 * sample + t);
        EXPECT_EQ(batch.targets[at], 1000 * sample + t + 1);
      }
      rows.push_back({sample, batch.step, batch.micro_batch_in_step});
    }
  }
  return rows;
}

TEST(DataLoader, RanksTogetherCoverTheGlobalBatchesInMegatronOrder) {
  const auto source = std::make_shared<CountingSource>(100);
  const int gbs = 16;
  const int mbs = 2;
  for (const int dp : {1, 2, 4}) {
    std::vector<std::vector<Row>> per_rank;
    for (int rank = 0; rank < dp; ++rank) {
      DataLoader loader(source, {gbs, mbs, rank, dp, 0, 0});
      EXPECT_EQ(loader.num_micro_batches(), gbs / (mbs * dp));
      per_rank.push_back(drain(loader));
      EXPECT_EQ(loader.consumed_samples(), 96);  // 6 whole global batches fit in 100 samples
    }
    // Megatron: micro-batch i of a step on rank r = consumed + i*mbs*dp + r*mbs + [0, mbs).
    std::vector<std::int64_t> interleaved;
    const std::size_t micro_batches = per_rank[0].size() / mbs;
    for (std::size_t i = 0; i < micro_batches; ++i) {
      for (int rank = 0; rank < dp; ++rank) {
        for (int r = 0; r < mbs; ++r) {
          const Row& row = per_rank[static_cast<std::size_t>(rank)][i * mbs + static_cast<std::size_t>(r)];
          EXPECT_EQ(row.step, row.sample / gbs);
          EXPECT_EQ(row.micro_batch, static_cast<int>((row.sample % gbs) / (mbs * dp)));
          interleaved.push_back(row.sample);
        }
      }
    }
    ASSERT_EQ(interleaved.size(), 96u) << "dp " << dp;
    for (std::size_t i = 0; i < interleaved.size(); ++i) {
      EXPECT_EQ(interleaved[i], static_cast<std::int64_t>(i)) << "dp " << dp;
    }
  }
}

TEST(DataLoader, ResumingFromConsumedSamplesContinuesTheSameStream) {
  const auto source = std::make_shared<CountingSource>(200);
  for (const int dp : {1, 2}) {
    for (int rank = 0; rank < dp; ++rank) {
      const DataLoaderOptions options{12, 3, rank, dp, 0, 0};
      DataLoader uninterrupted(source, options);
      const auto all = drain(uninterrupted);
      DataLoader first_part(source, options);
      const auto before = drain(first_part, 3 * first_part.num_micro_batches());  // three steps
      const std::int64_t checkpoint = first_part.consumed_samples();
      EXPECT_EQ(checkpoint, 36);
      DataLoaderOptions resumed_options = options;
      resumed_options.consumed_samples = checkpoint;
      DataLoader resumed(source, resumed_options);
      auto joined = before;
      const auto after = drain(resumed);
      joined.insert(joined.end(), after.begin(), after.end());
      EXPECT_EQ(joined, all) << "dp " << dp << " rank " << rank;
    }
  }
}

TEST(DataLoader, ValidationStopsAfterMaxStepsAndResets) {
  const auto source = std::make_shared<CountingSource>(100);
  DataLoader validation(source, {8, 2, 1, 2, 0, 3});
  const auto first = drain(validation);
  EXPECT_EQ(first.size(), 3u * 8 / 2);
  EXPECT_FALSE(validation.has_next());
  validation.reset(0);
  EXPECT_EQ(drain(validation), first);
}

TEST(DataLoader, RejectsIndivisibleBatchesNamingTheKeys) {
  const auto source = std::make_shared<CountingSource>(100);
  try {
    DataLoader loader(source, {10, 4, 0, 1, 0, 0});
    FAIL() << "10 is not divisible by 4";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("model.global_batch_size"), std::string::npos) << message;
    EXPECT_NE(message.find("model.micro_batch_size"), std::string::npos) << message;
    EXPECT_NE(message.find("data-parallel size"), std::string::npos) << message;
  }
  EXPECT_THROW(DataLoader(source, {12, 2, 0, 4, 0, 0}), Error);  // 12 % (2*4) != 0
  EXPECT_THROW(DataLoader(source, {8, 2, 2, 2, 0, 0}), Error);   // rank outside dp
  EXPECT_THROW(DataLoader(source, {8, 2, 0, 2, 4, 0}), Error);   // resume inside a global batch
  DataLoader exhausted(source, {8, 2, 0, 1, 96, 0});
  EXPECT_FALSE(exhausted.has_next());
  EXPECT_THROW(exhausted.next(), Error);
}

}  // namespace
}  // namespace adamant::data
