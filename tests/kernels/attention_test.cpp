#include "adamant/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "adamant/kernels/attention_dropout_layout.h"
#include "attention_dropout_reference.h"
#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

// Straightforward causal attention on qkv [B, T, 3, H, D], with an explicit mask
// matrix for dropout (factor 0 or the keep scale per probability).
std::vector<double> naive_attention(const std::vector<double>& qkv, const AttentionShape& s, const DropoutArgs& drop) {
  const int64_t C = s.heads * s.head_dim;
  std::vector<double> out(s.batch * s.seq * C, 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<double> scores(s.seq, -INFINITY);
        double max_score = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dot += qkv[(b * s.seq + i) * 3 * C + h * s.head_dim + d] *
                   qkv[(b * s.seq + j) * 3 * C + C + h * s.head_dim + d];
          }
          scores[j] = dot / std::sqrt(static_cast<double>(s.head_dim));
          max_score = std::max(max_score, scores[j]);
        }
        double total = 0;
        for (int64_t j = 0; j <= i; ++j) total += std::exp(scores[j] - max_score);
        for (int64_t j = 0; j <= i; ++j) {
          double p = std::exp(scores[j] - max_score) / total;
          if (drop.probability > 0) {
            const bool keep = testing::attention_dropout_keeps(drop, s.seq, b, h, i, j);
            p = keep ? p * testing::attention_dropout_keep_scale(drop.probability) : 0.0;
          }
          for (int64_t d = 0; d < s.head_dim; ++d) {
            out[(b * s.seq + i) * C + h * s.head_dim + d] +=
                p * qkv[(b * s.seq + j) * 3 * C + 2 * C + h * s.head_dim + d];
          }
        }
      }
    }
  }
  return out;
}

// A sequence over two 16 x 32 dropout blocks (and a partial third) per row: every word of
// the draws and the block numbering are exercised.
TEST(Attention, DropoutOverSeveralBlocksMatchesNaiveReference) {
  const AttentionShape shape{2, 70, 2, 3};
  auto qkv = random_normal(2 * 70 * 3 * 6, 7);
  std::vector<double> probs(2 * 2 * 70 * 70), out(2 * 70 * 6);
  const DropoutArgs drop{0.3f, 99, 4, 11};
  cpu::attention_forward(view(qkv), view(probs), view(out), shape, drop);
  const auto expected = naive_attention(qkv, shape, drop);
  const auto undropped = naive_attention(qkv, shape, DropoutArgs{});
  double changed = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], expected[i], 1e-12) << i;
    changed += std::abs(out[i] - undropped[i]);
  }
  EXPECT_GT(changed, 1.0);  // the mask did act
}

TEST(Attention, ForwardMatchesNaiveReference) {
  const AttentionShape shape{2, 7, 3, 4};
  auto qkv = random_normal(2 * 7 * 3 * 12, 1);
  std::vector<double> probs(2 * 3 * 7 * 7, 5.0), out(2 * 7 * 12);
  for (const float p : {0.0f, 0.4f}) {
    const DropoutArgs drop{p, 1234, 17, 5};
    cpu::attention_forward(view(qkv), view(probs), view(out), shape, drop);
    const auto expected = naive_attention(qkv, shape, drop);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], expected[i], 1e-12) << "p=" << p << " " << i;
  }
  // Probabilities: rows sum to one, the future is masked.
  for (int row = 0; row < 2 * 3 * 7; ++row) {
    const int i = row % 7;
    double sum = 0;
    for (int j = 0; j < 7; ++j) {
      if (j > i) {
        EXPECT_EQ(probs[row * 7 + j], 0.0);
      }
      sum += probs[row * 7 + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(Attention, FloatMatchesDouble) {
  const AttentionShape shape{1, 9, 2, 8};
  auto qkv = random_normal(9 * 3 * 16, 2);
  std::vector<double> probs(2 * 81), out(9 * 16);
  auto qkv32 = testing::to_float(qkv);
  std::vector<float> probs32(2 * 81), out32(9 * 16);
  cpu::attention_forward(view(qkv), view(probs), view(out), shape, {});
  cpu::attention_forward(view(qkv32), view(probs32), view(out32), shape, {});
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out32[i], out[i], 1e-5);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  const AttentionShape shape{2, 5, 2, 3};
  for (const float p : {0.0f, 0.3f}) {
    const DropoutArgs drop{p, 99, 3, 1};
    auto qkv = random_normal(2 * 5 * 3 * 6, 3);
    const auto probe = random_normal(2 * 5 * 6, 4);
    std::vector<double> probs(2 * 2 * 25), out(2 * 5 * 6);
    auto loss = [&] {
      cpu::attention_forward(view(qkv), view(probs), view(out), shape, drop);
      return testing::dot(out, probe);
    };
    loss();
    auto d_out = probe;
    std::vector<double> d_probs(probs.size()), d_qkv(qkv.size(), 99.0);
    cpu::attention_backward(view(d_out), view(qkv), view(probs), view(d_probs), view(d_qkv), shape, drop);
    testing::expect_gradient(qkv, d_qkv, loss, p > 0 ? "d_qkv with dropout" : "d_qkv");
  }
}

// A byte per element: p resolves to 1/256, ceil(p * 256) (at most 255) being the first
// kept value, and the kept elements scaled by 1 over the resolved keep probability.
TEST(AttentionDropout, KeepThresholdIsTheCeilingOfP256) {
  namespace layout = attention_dropout_layout;
  EXPECT_EQ(layout::keep_threshold(0.0f), 0u);
  EXPECT_EQ(layout::keep_threshold(0.5f), 128u);
  EXPECT_EQ(layout::keep_threshold(0.1f), 26u);  // 0.1f * 256 = 25.6
  EXPECT_EQ(layout::keep_threshold(0x1p-8f), 1u);
  EXPECT_EQ(layout::keep_threshold(0x1p-9f), 1u);
  EXPECT_EQ(layout::keep_threshold(254.5f / 256.0f), 255u);
  EXPECT_EQ(layout::keep_threshold(0.99999f), 255u);  // 255.997: still keeps the bytes equal to 255
  EXPECT_FLOAT_EQ(layout::keep_scale(0.1f), 256.0f / 230.0f);
  EXPECT_FLOAT_EQ(layout::keep_scale(0.5f), 2.0f);
  EXPECT_FLOAT_EQ(layout::keep_scale(0.0f), 1.0f);
  EXPECT_TRUE(layout::keeps(0x000000FFu, 0, 255u));
  EXPECT_FALSE(layout::keeps(0x000000FFu, 1, 1u));
  EXPECT_TRUE(layout::keeps(0x80000000u, 3, 128u));
  EXPECT_FALSE(layout::keeps(0x7FFFFFFFu, 3, 128u));
  EXPECT_TRUE(layout::keeps(0x00001A00u, 1, 26u));
}

// The sixteen elements a draw decides are independent: over 2 x 4 heads x 256 x 256
// elements (524,288), each is dropped with the resolved probability q = ceil(256 p) / 256,
// and two elements of one word (keys 2c and 2c + 1; rows r and r + 8) or of one draw's
// different words (keys c and c + 8) together with q^2, within five standard deviations.
TEST(AttentionDropout, DropsTheRequestedFractionIndependently) {
  const std::int64_t seq = 256, heads = 4, batch = 2;
  for (const float p : {0.1f, 0.5f}) {
    const DropoutArgs drop{p, 31, 7, 2};
    double dropped = 0, key_pairs = 0, row_pairs = 0, word_pairs = 0, count = 0, pairs = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t i = 0; i < seq; ++i) {
          for (std::int64_t j = 0; j < seq; ++j) {
            const bool drops = !testing::attention_dropout_keeps(drop, seq, b, h, i, j);
            dropped += drops;
            ++count;
            if (j % 2 == 0 && j % 16 < 8 && i % 16 < 8) {
              key_pairs += drops && !testing::attention_dropout_keeps(drop, seq, b, h, i, j + 1);
              row_pairs += drops && !testing::attention_dropout_keeps(drop, seq, b, h, i + 8, j);
              word_pairs += drops && !testing::attention_dropout_keeps(drop, seq, b, h, i, j + 8);
              ++pairs;
            }
          }
        }
      }
    }
    const double q = testing::attention_dropout_threshold(p) / 256.0;
    EXPECT_NEAR(dropped / count, q, 5 * std::sqrt(q * (1 - q) / count)) << "p=" << p;
    for (const double together : {key_pairs, row_pairs, word_pairs}) {
      EXPECT_NEAR(together / pairs, q * q, 5 * std::sqrt(q * q * (1 - q * q) / pairs)) << "p=" << p;
    }
  }
}

}  // namespace
}  // namespace adamant::kernels
