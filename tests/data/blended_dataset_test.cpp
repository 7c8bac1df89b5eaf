// Blending: Megatron's greedy blend order (reference computed in Python from its
// published algorithm), proportions close to the weights, and reads routed correctly.
#include "adamant/data/blended_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "adamant/core/error.h"

namespace adamant::data {
namespace {

// Sample i of source s holds tokens {s, i, i, ...}: a read reveals where it came from.
class LabelledSource final : public SampleSource {
 public:
  LabelledSource(int label, std::int64_t size) : label_(label), size_(size) {}
  std::int64_t size() const override { return size_; }
  int seq_length() const override { return 3; }
  void read_sample(std::int64_t index, std::span<std::int32_t> out) const override {
    ASSERT_LT(index, size_);
    out[0] = label_;
    for (std::size_t i = 1; i < out.size(); ++i) out[i] = static_cast<std::int32_t>(index);
  }

 private:
  int label_;
  std::int64_t size_;
};

std::vector<std::shared_ptr<const SampleSource>> sources(std::int64_t size, int count) {
  std::vector<std::shared_ptr<const SampleSource>> result;
  for (int s = 0; s < count; ++s) result.push_back(std::make_shared<LabelledSource>(s, size));
  return result;
}

TEST(BlendedDataset, OrderMatchesMegatronGreedyBlend) {
  const std::vector<double> weights{5, 3, 2};  // normalised to 0.5, 0.3, 0.2
  const BlendedDataset blended(sources(100, 3), weights, 20);
  const std::vector<int> expected_source{0, 1, 2, 0, 1, 0, 2, 0, 1, 0, 0, 1, 2, 0, 1, 0, 2, 0, 1, 0};
  const std::vector<std::int64_t> expected_index{0, 0, 0, 1, 1, 2, 1, 3, 2, 4, 5, 3, 2, 6, 4, 7, 3, 8, 5, 9};
  ASSERT_EQ(blended.size(), 20);
  std::vector<std::int32_t> out(4);
  for (std::int64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(blended.source_of(i), expected_source[static_cast<std::size_t>(i)]) << i;
    EXPECT_EQ(blended.index_in_source(i), expected_index[static_cast<std::size_t>(i)]) << i;
    blended.read_sample(i, out);
    EXPECT_EQ(out[0], expected_source[static_cast<std::size_t>(i)]);
    EXPECT_EQ(out[3], expected_index[static_cast<std::size_t>(i)]);
  }
}

TEST(BlendedDataset, ProportionsTrackWeights) {
  const std::vector<double> weights{0.7, 0.2, 0.1};
  const std::int64_t total = 10000;
  const auto counts = blended_source_sample_counts(normalize_blend_weights(weights), total);
  // Python: [math.ceil(10000 * w * 1.005) for w in normalised weights] (rounding included).
  EXPECT_EQ(counts, (std::vector<std::int64_t>{7035, 2011, 1006}));
  const BlendedDataset blended(sources(counts[0], 3), weights, total);
  std::vector<std::int64_t> taken(3, 0);
  for (std::int64_t i = 0; i < total; ++i) {
    ++taken[static_cast<std::size_t>(blended.source_of(i))];
    // Greedy error minimisation keeps every prefix within one sample of its share.
    for (int s = 0; s < 3; ++s) {
      EXPECT_LE(std::abs(static_cast<double>(taken[static_cast<std::size_t>(s)]) -
                         weights[static_cast<std::size_t>(s)] * static_cast<double>(i + 1)),
                1.0 + 1e-9)
          << "sample " << i << " source " << s;
    }
  }
}

TEST(BlendedDataset, RejectsBadConfigurations) {
  const std::vector<double> two{1, 1};
  EXPECT_THROW(BlendedDataset(sources(10, 3), two, 10), Error);  // weight count mismatch
  const std::vector<double> negative{1, -1, 1};
  EXPECT_THROW(BlendedDataset(sources(10, 3), negative, 10), Error);
  const std::vector<double> even{1, 1, 1};
  EXPECT_THROW(BlendedDataset(sources(2, 3), even, 30), Error);  // sources too small for their share
  const std::vector<double> zero{0, 0};
  EXPECT_THROW(normalize_blend_weights(zero), Error);
}

}  // namespace
}  // namespace adamant::data
