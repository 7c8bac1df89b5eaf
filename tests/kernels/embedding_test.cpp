#include "adamant/kernels/embedding.h"

#include <gtest/gtest.h>

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
  embedding_backward(view(d_out_copy), view(tokens), view(d_word), view(d_position), shape, stream);
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

TEST(Embedding, RejectsOutOfRangeTokens) {
  Stream stream;
  std::vector<std::int32_t> tokens{0, 5};
  std::vector<double> word(10), position(4), out(4);
  EXPECT_THROW(embedding_forward(view(tokens), view(word), view(position), view(out), {1, 2, 2, 5}, stream), Error);
}

}  // namespace
}  // namespace adamant::kernels
