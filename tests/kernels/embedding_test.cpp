#include "adamant/kernels/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

TEST(Embedding, ForwardAndBackwardWithRepeatedTokens) {
  Stream stream;
  const EmbeddingShape shape{2, 3, 4, 5};
  std::vector<std::int32_t> tokens{1, 4, 1, 0, 1, 4};
  auto word = random_normal(5 * 4, 1), position = random_normal(3 * 4, 2);
  std::vector<double> out(2 * 3 * 4);
  embedding_forward(view(tokens), view(word), view(position), view(out), shape, stream);
  for (int row = 0; row < 6; ++row) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(out[row * 4 + c], word[tokens[row] * 4 + c] + position[(row % 3) * 4 + c]);
  }
  const auto d_out = random_normal(24, 3);
  auto d_out_copy = d_out;
  std::vector<double> d_word(20, 0.5), d_position(12, -1.0);
  embedding_backward(view(d_out_copy), view(tokens), view(d_word), view(d_position), Tensor{}, shape, stream);
  for (int v = 0; v < 5; ++v) {
    for (int c = 0; c < 4; ++c) {
      double expected = 0.5;
      for (int row = 0; row < 6; ++row) expected += tokens[row] == v ? d_out[row * 4 + c] : 0.0;
      EXPECT_NEAR(d_word[v * 4 + c], expected, 1e-14);
    }
  }
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(d_position[t * 4 + c], -1.0 + d_out[t * 4 + c] + d_out[12 + t * 4 + c], 1e-14);
  }
}

TEST(Embedding, RejectsNegativeTokens) {
  Stream stream;
  std::vector<std::int32_t> tokens{0, -1};
  std::vector<double> word(10), position(4), out(4);
  EXPECT_THROW(embedding_forward(view(tokens), view(word), view(position), view(out), {1, 2, 2, 5}, stream), Error);
  std::vector<double> d_word(10), d_position(4);
  EXPECT_THROW(
      embedding_backward(view(out), view(tokens), view(d_word), view(d_position), Tensor{}, {1, 2, 2, 5}, stream),
      Error);
}

// Vocabulary-parallel lookup: slice s holds rows [starts[s], starts[s + 1]) of the table;
// the first slice adds the position embedding, the others pass an empty one. The slices'
// outputs summed, and their d_word concatenated, must be the unsliced results.
void check_vocabulary_slices(const std::vector<std::int64_t>& starts) {
  Stream stream;
  const std::int64_t batch = 3, seq = 4, C = 5, vocab = starts.back();
  std::vector<std::int32_t> tokens(batch * seq);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + i / 5) % vocab);
  tokens[1] = tokens[2] = static_cast<std::int32_t>(vocab - 1);  // repeats, and the ends of the table
  tokens[3] = 0;
  auto word = random_normal(vocab * C, 4), position = random_normal(seq * C, 5);
  const auto d_out = random_normal(batch * seq * C, 6);
  const auto d_word_start = random_normal(vocab * C, 7), d_position_start = random_normal(seq * C, 8);

  // The unsliced reference, by the definition.
  std::vector<double> expected_out(batch * seq * C), expected_d_word = d_word_start,
                                                     expected_d_position = d_position_start;
  for (std::int64_t row = 0; row < batch * seq; ++row) {
    for (std::int64_t c = 0; c < C; ++c) {
      expected_out[row * C + c] = word[tokens[row] * C + c] + position[(row % seq) * C + c];
      expected_d_word[tokens[row] * C + c] += d_out[row * C + c];
      expected_d_position[(row % seq) * C + c] += d_out[row * C + c];
    }
  }

  std::vector<double> summed(batch * seq * C, 0.0), d_word_slices, d_position = d_position_start;
  for (std::size_t s = 0; s + 1 < starts.size(); ++s) {
    const EmbeddingShape slice{batch, seq, C, starts[s + 1] - starts[s], starts[s]};
    std::vector<double> word_slice(word.begin() + starts[s] * C, word.begin() + starts[s + 1] * C);
    std::vector<double> out(batch * seq * C, std::nan(""));
    embedding_forward(view(tokens), view(word_slice), s == 0 ? view(position) : Tensor{}, view(out), slice, stream);
    for (std::size_t i = 0; i < out.size(); ++i) summed[i] += out[i];

    auto d_out_copy = d_out;
    std::vector<double> d_word(d_word_start.begin() + starts[s] * C, d_word_start.begin() + starts[s + 1] * C);
    embedding_backward(view(d_out_copy), view(tokens), view(d_word), s == 0 ? view(d_position) : Tensor{}, Tensor{},
                       slice, stream);
    d_word_slices.insert(d_word_slices.end(), d_word.begin(), d_word.end());
  }
  ASSERT_EQ(d_word_slices.size(), expected_d_word.size());
  for (std::size_t i = 0; i < summed.size(); ++i) EXPECT_NEAR(summed[i], expected_out[i], 1e-14) << "out[" << i << "]";
  for (std::size_t i = 0; i < d_word_slices.size(); ++i) {
    EXPECT_NEAR(d_word_slices[i], expected_d_word[i], 1e-14) << "d_word[" << i << "]";
  }
  for (std::size_t i = 0; i < d_position.size(); ++i) {
    EXPECT_NEAR(d_position[i], expected_d_position[i], 1e-14) << "d_position[" << i << "]";
  }
}

TEST(Embedding, VocabularySlicesSumToTheWholeTable) {
  check_vocabulary_slices({0, 11});           // one slice: the whole table
  check_vocabulary_slices({0, 6, 12});        // two even slices
  check_vocabulary_slices({0, 4, 8, 12});     // three even slices
  check_vocabulary_slices({0, 5, 7, 13});     // three uneven slices
  check_vocabulary_slices({0, 1, 2, 9, 10});  // slices of one row
}

TEST(Embedding, EmptyPositionAddsNoneAndSkipsItsGradient) {
  Stream stream;
  const EmbeddingShape shape{2, 3, 4, 5};
  std::vector<std::int32_t> tokens{1, 4, 1, 0, 3, 4};
  auto word = random_normal(5 * 4, 9);
  std::vector<double> out(2 * 3 * 4);
  embedding_forward(view(tokens), view(word), Tensor{}, view(out), shape, stream);
  for (int row = 0; row < 6; ++row) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(out[row * 4 + c], word[tokens[row] * 4 + c]);
  }
  auto d_out = random_normal(24, 10);
  std::vector<double> d_word(20, 0.0);
  embedding_backward(view(d_out), view(tokens), view(d_word), Tensor{}, Tensor{}, shape, stream);
  for (int v = 0; v < 5; ++v) {
    for (int c = 0; c < 4; ++c) {
      double expected = 0.0;
      for (int row = 0; row < 6; ++row) expected += tokens[row] == v ? d_out[row * 4 + c] : 0.0;
      EXPECT_NEAR(d_word[v * 4 + c], expected, 1e-14);
    }
  }
}

// The GPU's scratch, by hand for 2,048 tokens of 768 channels: four word arrays (keys and
// positions, twice) of 8,192 bytes, the digit counts of 8 sort tiles (256 x 8 words), two
// partial sums of 16 chunks x 768 floats, and three words per chunk (64 bytes each, padded
// to 256). The CPU needs none.
TEST(Embedding, BackwardScratchIsTheGpuSortAndPartials) {
  EXPECT_EQ(embedding_backward_scratch_floats(Device::cpu(), 2048, 768), 0);
  const std::size_t bytes = 4 * 8192 + 8192 + 2 * 16 * 768 * 4 + 3 * 256;
  EXPECT_EQ(embedding_backward_scratch_floats(Device::cuda(0), 2048, 768), static_cast<std::int64_t>(bytes / 4));
  const embedding_scratch::Layout l = embedding_scratch::layout(2048, 768);
  EXPECT_EQ(l.total, bytes);
  EXPECT_EQ(l.digit_counts, 4u * 8192);
  EXPECT_EQ(l.partial_last - l.partial_first, 16u * 768 * 4);
  EXPECT_EQ(embedding_scratch::layout(0, 768).total, 0u);
}

}  // namespace
}  // namespace adamant::kernels
