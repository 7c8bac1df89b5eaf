// The QKV bias gradient that the CUDA flash attention backward sums as its passes store d_qkv
// (kernels/flash_attention.h, BiasGradOut): the column sums of d_qkv as stored, against sums in
// double of the d_qkv the GPU returned, on every path the backward takes (recomputing query
// pass, stored score gradients, stored scores over groups of slots) and in the launcher's three
// regimes (partial sums with room for column_sums' own, partial sums alone, too little scratch:
// d_qkv summed again). The d_qkv bits must not change when the sums are asked for, and runs
// repeat bit for bit.
//
// Bound: an fp32 sum of n terms in any order is off by at most (n - 1) 2^-24 sum |x| (Higham,
// Accuracy and Stability of Numerical Algorithms, 4.2); n is the column's rows. A row tile
// summed twice or missed is off by about 4 of its standard deviations, far outside it for
// the shapes here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/flash_attention.h"
#include "adamant/kernels/workspace.h"
#include "kernels/cuda_attention_test_util.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels {
namespace {

using namespace attention_testing;  // NOLINT: the shared test helpers

constexpr double kFp32Rounding = 1.0 / 16777216.0;  // 2^-24

// Expects each of the 3C column sums within the bound of d_qkv's [tokens, 3C] rows summed in double.
void expect_column_sums(const std::vector<float>& sums, const std::vector<float>& d_qkv, std::int64_t tokens,
                        const std::string& what) {
  const std::size_t columns = sums.size();
  ASSERT_EQ(d_qkv.size(), columns * static_cast<std::size_t>(tokens)) << what;
  std::vector<float> expected(columns);
  std::vector<double> bound(columns);
  for (std::size_t c = 0; c < columns; ++c) {
    double sum = 0.0, magnitude = 0.0;
    for (std::int64_t t = 0; t < tokens; ++t) {
      const double x = d_qkv[static_cast<std::size_t>(t) * columns + c];
      sum += x;
      magnitude += std::abs(x);
    }
    expected[c] = static_cast<float>(sum);
    bound[c] = static_cast<double>(tokens) * kFp32Rounding * magnitude + 1e-30;
  }
  expect_within(sums, expected, bound, what);
}

class CudaFlashAttentionBias : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CudaFlashAttentionBias, BackwardSumsTheQkvBiasGradientAsStored) {
  ADAMANT_REQUIRE_GPU();
  const AttentionShape shape = GetParam().shape;
  const DropoutArgs dropout{GetParam().dropout, 0x5eedf00dull, 5, 9};
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  const Stream stream(testing::gpu());
  auto qkv = bf16_on_gpu(random_bf16_values(static_cast<std::size_t>(tokens * 3 * channels), 21, 1.0));
  auto d_out = bf16_on_gpu(random_bf16_values(static_cast<std::size_t>(tokens * channels), 22, 1.0));
  auto out = poisoned_bf16(static_cast<std::size_t>(tokens * channels));
  auto logsumexp = poisoned_floats(static_cast<std::size_t>(tokens * shape.heads));
  flash_attention_forward(qkv.device_view(), out.device_view(), logsumexp.device_view(), shape, dropout, stream);
  auto statistics = poisoned_floats(flash_attention_statistics_bytes(shape) / sizeof(float));
  MirroredArray<std::uint16_t> scores(flash_attention_scores_bytes(shape) / 2, DType::bf16);
  const Tensor all_scores = scores.device_view();
  const Tensor one_slot(all_scores.data, DType::u8, all_scores.device,
                        {static_cast<std::int64_t>(flash_attention_scores_bytes(1, 1, shape.seq))});
  Workspace workspace(stream, WorkspaceNeeds{.matmul = true});

  // d_qkv without and with the bias gradient, on each path.
  auto run = [&](const Tensor& score_scratch, MirroredArray<float>* bias) {
    auto d_qkv = poisoned_bf16(static_cast<std::size_t>(tokens * 3 * channels));
    const BiasGradOut sums =
        bias != nullptr ? BiasGradOut{bias->device_view(), 3 * channels, &workspace} : BiasGradOut{};
    flash_attention_backward(d_out.device_view(), qkv.device_view(), out.device_view(), logsumexp.device_view(),
                             d_qkv.device_view(), shape, dropout, stream, statistics.device_view(), score_scratch,
                             sums);
    stream.synchronize();
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return d_qkv.download();
  };
  struct Path {
    const char* name;
    Tensor scores;
  };
  for (const Path& path : {Path{"recomputing", Tensor{}}, Path{"stored scores", all_scores},
                           Path{"stored scores, one slot at a time", one_slot}}) {
    SCOPED_TRACE(path.name);
    const std::vector<std::uint16_t> plain = run(path.scores, nullptr);
    auto bias = poisoned_floats(static_cast<std::size_t>(3 * channels));
    const std::vector<std::uint16_t> summed = run(path.scores, &bias);
    testing::expect_bitwise_equal(summed, plain, "d_qkv with the bias gradient asked for");
    const std::vector<float> first = bias.download();
    expect_column_sums(first, testing::bf16_values(summed), tokens, "the QKV bias gradient");
    auto again = poisoned_floats(static_cast<std::size_t>(3 * channels));
    run(path.scores, &again);
    testing::expect_bitwise_equal(again.download(), first, "the QKV bias gradient of a second run");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFlashAttentionBias,
                         ::testing::Values(AttentionCase{{2, 128, 4, 64}, 0.0f}, AttentionCase{{2, 128, 4, 64}, 0.1f},
                                           AttentionCase{{2, 37, 3, 64}, 0.1f}, AttentionCase{{1, 1000, 2, 128}, 0.0f},
                                           AttentionCase{{1, 1000, 2, 128}, 0.1f}, AttentionCase{{2, 128, 4, 80}, 0.1f},
                                           AttentionCase{{1, 300, 2, 96}, 0.0f}, AttentionCase{{3, 65, 2, 128}, 0.1f},
                                           AttentionCase{{1, 1, 2, 80}, 0.1f}, AttentionCase{{2, 2048, 12, 64}, 0.1f}),
                         case_name);

// The launcher's regimes by the scratch it is given: room for the partial sums and column_sums'
// own, for the partial sums alone (column_sums in one slice), and too little (d_qkv's columns
// summed again). Each gives the column sums of the same d_qkv bits.
TEST(CudaFlashAttentionBiasScratch, EveryScratchSizeGivesTheColumnSums) {
  ADAMANT_REQUIRE_GPU();
  namespace launchers = cuda::flash_attention_launchers;
  const AttentionShape shape{2, 300, 3, 64};
  const launchers::Problem problem{2, 300, 3, 64};
  const std::int64_t tokens = 600, channels = 192, columns = 3 * channels;
  const std::int64_t partial_floats = launchers::bias_partials_floats(problem);
  ASSERT_EQ(partial_floats, 2 * 19 * columns);  // 19 tiles of 16 rows a sample
  const Stream stream(testing::gpu());
  auto qkv = bf16_on_gpu(random_bf16_values(static_cast<std::size_t>(tokens * columns), 31, 1.0));
  auto d_out = bf16_on_gpu(random_bf16_values(static_cast<std::size_t>(tokens * channels), 32, 1.0));
  auto out = poisoned_bf16(static_cast<std::size_t>(tokens * channels));
  auto logsumexp = poisoned_floats(static_cast<std::size_t>(tokens * shape.heads));
  flash_attention_forward(qkv.device_view(), out.device_view(), logsumexp.device_view(), shape, {}, stream);
  auto statistics = poisoned_floats(flash_attention_statistics_bytes(shape) / sizeof(float));
  auto scratch = poisoned_floats(static_cast<std::size_t>(partial_floats * 2));
  const launchers::Dropout no_dropout{false, 0.0f, 1.0f, 0, 0, 0, nullptr};
  std::vector<std::uint16_t> first_d_qkv;
  for (const std::int64_t scratch_floats : {partial_floats * 2, partial_floats, partial_floats - 1}) {
    SCOPED_TRACE("a scratch of " + std::to_string(scratch_floats) + " floats");
    auto d_qkv = poisoned_bf16(static_cast<std::size_t>(tokens * columns));
    auto bias = poisoned_floats(static_cast<std::size_t>(columns));
    const launchers::BackwardOperands operands{static_cast<const std::uint16_t*>(d_out.device_view().data),
                                               static_cast<const std::uint16_t*>(qkv.device_view().data),
                                               static_cast<const std::uint16_t*>(out.device_view().data),
                                               static_cast<const float*>(logsumexp.device_view().data),
                                               static_cast<std::uint16_t*>(d_qkv.device_view().data),
                                               static_cast<float*>(statistics.device_view().data)};
    const ColumnSumsOut sums{static_cast<float*>(bias.device_view().data), columns,
                             static_cast<float*>(scratch.device_view().data), scratch_floats};
    ASSERT_EQ(launchers::flash_attention_backward(operands, problem, no_dropout, cuda_stream_of(stream), sums),
              cudaSuccess);
    stream.synchronize();
    const std::vector<std::uint16_t> stored = d_qkv.download();
    if (first_d_qkv.empty()) first_d_qkv = stored;
    testing::expect_bitwise_equal(stored, first_d_qkv, "d_qkv");
    expect_column_sums(bias.download(), testing::bf16_values(stored), tokens, "the QKV bias gradient");
  }
}

}  // namespace
}  // namespace adamant::kernels
