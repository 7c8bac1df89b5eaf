// The CPU flash attention (kernels/flash_attention.h) against the materialised-softmax
// reference (cpu::attention_forward/backward), an independent logsumexp, and finite
// differences; through the public dispatcher, as the model calls it.
#include "adamant/kernels/flash_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/kernels/workspace.h"
#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

std::size_t numel_qkv(const AttentionShape& s) {
  return static_cast<std::size_t>(s.batch * s.seq * 3 * s.heads * s.head_dim);
}
std::size_t numel_out(const AttentionShape& s) {
  return static_cast<std::size_t>(s.batch * s.seq * s.heads * s.head_dim);
}
std::size_t numel_rows(const AttentionShape& s) { return static_cast<std::size_t>(s.batch * s.heads * s.seq); }
std::size_t numel_probs(const AttentionShape& s) { return numel_rows(s) * static_cast<std::size_t>(s.seq); }

// log sum_{j <= i} exp(q_i . k_j / sqrt(d)) in fp64 with a max shift, [batch, heads, seq].
std::vector<double> logsumexp_of(const std::vector<double>& qkv, const AttentionShape& s) {
  const std::int64_t C = s.heads * s.head_dim;
  std::vector<double> lse(numel_rows(s));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      for (std::int64_t i = 0; i < s.seq; ++i) {
        std::vector<double> scores;
        for (std::int64_t j = 0; j <= i; ++j) {
          double score = 0;
          for (std::int64_t d = 0; d < s.head_dim; ++d) {
            score += qkv[(b * s.seq + i) * 3 * C + h * s.head_dim + d] *
                     qkv[(b * s.seq + j) * 3 * C + C + h * s.head_dim + d];
          }
          scores.push_back(score / std::sqrt(static_cast<double>(s.head_dim)));
        }
        double largest = scores[0];
        for (const double v : scores) largest = std::max(largest, v);
        double sum = 0;
        for (const double v : scores) sum += std::exp(v - largest);
        lse[(b * s.heads + h) * s.seq + i] = largest + std::log(sum);
      }
    }
  }
  return lse;
}

struct FlashCase {
  std::int64_t head_dim;
  float dropout;
};

class CpuFlashAttention : public ::testing::TestWithParam<FlashCase> {};

// 130 queries: two full 64-row blocks and a partial one, and a partial 16 x 16 dropout block.
TEST_P(CpuFlashAttention, MatchesReferenceForwardAndBackward) {
  const FlashCase c = GetParam();
  const AttentionShape shape{2, 130, 2, c.head_dim};
  const DropoutArgs drop{c.dropout, 4242, 9, 13};
  Stream stream;
  auto qkv = random_normal(numel_qkv(shape), 11, 0.5);
  const auto d_out = random_normal(numel_out(shape), 12);

  std::vector<double> out(numel_out(shape), 7.0), lse(numel_rows(shape), 7.0);
  flash_attention_forward(view(qkv), view(out), view(lse), shape, drop, stream);
  std::vector<double> probs(numel_probs(shape)), expected_out(numel_out(shape));
  cpu::attention_forward(view(qkv), view(probs), view(expected_out), shape, drop);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], expected_out[i], 1e-12) << i;
  const auto expected_lse = logsumexp_of(qkv, shape);
  for (std::size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], expected_lse[i], 1e-12) << i;

  auto d_out_copy = d_out;
  std::vector<double> d_qkv(qkv.size(), 7.0), d_probs(probs.size()), expected_d_qkv(qkv.size());
  flash_attention_backward(view(d_out_copy), view(qkv), view(out), view(lse), view(d_qkv), shape, drop, stream, {});
  cpu::attention_backward(view(d_out_copy), view(qkv), view(probs), view(d_probs), view(expected_d_qkv), shape, drop);
  for (std::size_t i = 0; i < d_qkv.size(); ++i) ASSERT_NEAR(d_qkv[i], expected_d_qkv[i], 1e-11) << i;
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, CpuFlashAttention,
                         ::testing::Values(FlashCase{64, 0.0f}, FlashCase{80, 0.0f}, FlashCase{96, 0.0f},
                                           FlashCase{128, 0.0f}, FlashCase{64, 0.1f}, FlashCase{80, 0.2f},
                                           FlashCase{96, 0.1f}, FlashCase{128, 0.3f}),
                         [](const ::testing::TestParamInfo<FlashCase>& info) {
                           std::ostringstream name;
                           name << "d" << info.param.head_dim << (info.param.dropout > 0 ? "_dropout" : "");
                           return name.str();
                         });

// The dropout mask acts, and is the reference's: dropping changes the output.
TEST(CpuFlashAttention, DropoutChangesTheOutput) {
  const AttentionShape shape{1, 40, 2, 8};
  Stream stream;
  auto qkv = random_normal(numel_qkv(shape), 5);
  std::vector<double> kept(numel_out(shape)), dropped(numel_out(shape)), lse(numel_rows(shape));
  flash_attention_forward(view(qkv), view(kept), view(lse), shape, {}, stream);
  flash_attention_forward(view(qkv), view(dropped), view(lse), shape, {0.4f, 1, 0, 3}, stream);
  double changed = 0;
  for (std::size_t i = 0; i < kept.size(); ++i) changed += std::abs(kept[i] - dropped[i]);
  EXPECT_GT(changed, 1.0);
}

// A sample offset in memory (what a recorded pass reads) adds to the first sample index:
// samples 5 and 6 through index 2 plus offset 3 are samples 5 and 6 through index 5, forward
// and backward; another offset draws other masks.
TEST(CpuFlashAttention, SampleOffsetInMemoryAddsToTheFirstSampleIndex) {
  const AttentionShape shape{2, 24, 2, 8};
  Stream stream;
  const auto qkv = random_normal(numel_qkv(shape), 15);
  const auto d_out = random_normal(numel_out(shape), 16);
  std::uint64_t offset = 3;
  DropoutArgs split{0.3f, 99, 2, 4};
  split.sample_offset = &offset;
  const DropoutArgs folded{0.3f, 99, 5, 4};
  auto run = [&](const DropoutArgs& drop) {
    std::vector<double> out(numel_out(shape)), lse(numel_rows(shape)), d_qkv(numel_qkv(shape));
    auto q = qkv;
    auto d = d_out;
    flash_attention_forward(view(q), view(out), view(lse), shape, drop, stream);
    flash_attention_backward(view(d), view(q), view(out), view(lse), view(d_qkv), shape, drop, stream, {});
    out.insert(out.end(), d_qkv.begin(), d_qkv.end());
    return out;
  };
  const auto expected = run(folded);
  EXPECT_EQ(run(split), expected);
  offset = 4;  // read at each call
  EXPECT_NE(run(split), expected);
}

TEST(CpuFlashAttention, BackwardMatchesFiniteDifferences) {
  const AttentionShape shape{2, 19, 2, 4};
  Stream stream;
  for (const float p : {0.0f, 0.3f}) {
    const DropoutArgs drop{p, 77, 2, 6};
    auto qkv = random_normal(numel_qkv(shape), 3);
    const auto probe = random_normal(numel_out(shape), 4);
    std::vector<double> out(numel_out(shape)), lse(numel_rows(shape));
    auto loss = [&] {
      flash_attention_forward(view(qkv), view(out), view(lse), shape, drop, stream);
      return testing::dot(out, probe);
    };
    loss();
    auto d_out = probe;
    std::vector<double> d_qkv(qkv.size(), 99.0);
    flash_attention_backward(view(d_out), view(qkv), view(out), view(lse), view(d_qkv), shape, drop, stream, {});
    testing::expect_gradient(qkv, d_qkv, loss, p > 0 ? "d_qkv with dropout" : "d_qkv");
  }
}

TEST(CpuFlashAttention, FloatMatchesDouble) {
  const AttentionShape shape{1, 70, 2, 16};
  Stream stream;
  const auto qkv = random_normal(numel_qkv(shape), 8);
  auto qkv64 = qkv;
  auto qkv32 = testing::to_float(qkv);
  std::vector<double> out(numel_out(shape)), lse(numel_rows(shape));
  std::vector<float> out32(numel_out(shape)), lse32(numel_rows(shape));
  flash_attention_forward(view(qkv64), view(out), view(lse), shape, {0.1f, 3, 0, 1}, stream);
  flash_attention_forward(view(qkv32), view(out32), view(lse32), shape, {0.1f, 3, 0, 1}, stream);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out32[i], out[i], 1e-5) << i;
  for (std::size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse32[i], lse[i], 1e-5) << i;
}

// The GPU backward's score scratch holds one 64 x 64 bf16 tile for every pair of a key tile
// and a query tile on or below the diagonal, per sample and head: counted pair by pair here.
TEST(FlashAttentionScores, ScratchHoldsEveryTileOnOrBelowTheDiagonal) {
  for (const std::int64_t seq : {1, 63, 64, 65, 128, 2047, 2048, 8192}) {
    const std::int64_t tiles = (seq + 63) / 64;
    std::int64_t pairs = 0;
    for (std::int64_t query_tile = 0; query_tile < tiles; ++query_tile) {
      for (std::int64_t key_tile = 0; key_tile <= query_tile; ++key_tile) ++pairs;
    }
    const AttentionShape shape{3, seq, 5, 64};
    EXPECT_EQ(flash_attention_scores_bytes(shape), static_cast<std::size_t>(3 * 5 * pairs * 64 * 64 * 2))
        << "seq " << seq;
  }
  EXPECT_EQ(flash_attention_scores_bytes(AttentionShape{0, 2048, 12, 64}), 0u);
  // GPT-3 126M, micro-batch 8: 528 tiles a head, 96 heads in all.
  EXPECT_EQ(flash_attention_scores_bytes(AttentionShape{8, 2048, 12, 64}), std::size_t{96} * 528 * 8192);
}

// Asked for the bias gradient of the layer whose output qkv is, the backward also writes the
// column sums of d_qkv, each in row order (cpu::bias_grad's bits); a bias of other than 3 x heads
// x head_dim columns is refused. With no tokens the bias gradient is zero.
TEST(CpuFlashAttention, BackwardSumsTheBiasGradientOfDqkv) {
  const AttentionShape shape{2, 37, 3, 8};
  const std::int64_t columns = 3 * shape.heads * shape.head_dim;
  Stream stream;
  Workspace workspace(stream, WorkspaceNeeds{.matmul = true});
  auto qkv = random_normal(numel_qkv(shape), 21, 0.5);
  auto d_out = random_normal(numel_out(shape), 22);
  std::vector<double> out(numel_out(shape)), lse(numel_rows(shape));
  const DropoutArgs drop{0.1f, 77, 3, 5};
  flash_attention_forward(view(qkv), view(out), view(lse), shape, drop, stream);
  std::vector<double> d_qkv(qkv.size(), 7.0), d_bias(static_cast<std::size_t>(columns), 7.0);
  flash_attention_backward(view(d_out), view(qkv), view(out), view(lse), view(d_qkv), shape, drop, stream, {}, {},
                           {view(d_bias), columns, &workspace});
  std::vector<double> expected(d_bias.size());
  for (std::int64_t c = 0; c < columns; ++c) {
    double sum = 0.0;
    for (std::int64_t t = 0; t < shape.batch * shape.seq; ++t) sum += d_qkv[static_cast<std::size_t>(t * columns + c)];
    expected[static_cast<std::size_t>(c)] = sum;
  }
  for (std::size_t c = 0; c < d_bias.size(); ++c) EXPECT_EQ(d_bias[c], expected[c]) << "column " << c;

  std::vector<double> short_bias(static_cast<std::size_t>(columns - 1));
  try {
    flash_attention_backward(view(d_out), view(qkv), view(out), view(lse), view(d_qkv), shape, drop, stream, {}, {},
                             {view(short_bias), columns - 1, &workspace});
    FAIL() << "a bias of " << columns - 1 << " columns was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("3 x heads x head_dim = " + std::to_string(columns) + " columns"),
              std::string::npos)
        << error.what();
  }

  // No tokens: zero-length operands (on the CPU, views of memory that holds nothing of them).
  const AttentionShape empty{0, 37, 3, 8};
  auto nothing = [&](std::vector<double>& memory) { return Tensor::flat(memory.data(), DType::f64, Device::cpu(), 0); };
  flash_attention_backward(nothing(d_out), nothing(qkv), nothing(out), nothing(lse), nothing(d_qkv), empty, {}, stream,
                           {}, {}, {view(d_bias), columns, &workspace});
  for (std::size_t c = 0; c < d_bias.size(); ++c) EXPECT_EQ(d_bias[c], 0.0) << "column " << c << " with no tokens";
}

TEST(CpuFlashAttention, DispatcherRejectsBadOperands) {
  const AttentionShape shape{1, 4, 1, 2};
  Stream stream;
  std::vector<double> qkv(numel_qkv(shape), 0.1), out(numel_out(shape)), lse(numel_rows(shape));
  std::vector<float> lse32(numel_rows(shape));
  EXPECT_THROW(flash_attention_forward(view(qkv), view(out), view(lse32), shape, {}, stream), Error);
  std::vector<double> short_out(numel_out(shape) - 1);
  EXPECT_THROW(flash_attention_forward(view(qkv), view(short_out), view(lse), shape, {}, stream), Error);
  flash_attention_forward(view(qkv), view(out), view(lse), shape, {}, stream);
  // d_qkv over the inputs: backward writes it while it still reads them.
  EXPECT_THROW(flash_attention_backward(view(out), view(qkv), view(out), view(lse), view(qkv), shape, {}, stream, {}),
               Error);
}

}  // namespace
}  // namespace adamant::kernels
