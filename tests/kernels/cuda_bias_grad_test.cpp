// The CUDA GELU backward and dropout that also sum their output's columns (a bias
// gradient: kernels/gelu.h and dropout.h with a BiasGradOut). Their output must be
// bitwise the plain kernel's (whose values cuda_pointwise_test.cpp checks against the
// CPU), a rematerialised GELU output bitwise the forward's, and the bias gradient the
// column sums of that output as stored: against sums in double of the downloaded bf16
// values, tolerance 1e-5 of the sum of their absolute values (fp32 sums in another
// order), and bitwise equal from run to run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/workspace.h"
#include "kernels/cuda_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::MirroredArray;

// sums against the column sums in double of `values` [rows, cols] (bf16 bits).
void expect_column_sums(const std::vector<float>& sums, const std::vector<std::uint16_t>& values, std::int64_t rows,
                        std::int64_t cols) {
  for (std::int64_t j = 0; j < cols; ++j) {
    double sum = 0, magnitude = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const double v = bf16_to_f32(values[static_cast<std::size_t>(i * cols + j)]);
      sum += v;
      magnitude += std::abs(v);
    }
    ASSERT_LE(std::abs(sums[static_cast<std::size_t>(j)] - sum), 1e-5 * magnitude)
        << "column " << j << ": gpu " << sums[static_cast<std::size_t>(j)] << ", double " << sum;
  }
}

// The bias sums of run `run` (0 or 1) of a kernel whose output is `values` [rows, cols]: on
// run 0 those of the values (kept in first_sums), on run 1 bitwise run 0's.
void check_run_sums(int run, const std::vector<float>& sums, std::vector<float>& first_sums,
                    const std::vector<std::uint16_t>& values, std::int64_t rows, std::int64_t cols) {
  if (run == 1) {
    EXPECT_EQ(sums, first_sums) << "bias gradient run to run";
    return;
  }
  first_sums = sums;
  expect_column_sums(sums, values, rows, cols);
}

MirroredArray<float> nan_sums_on_gpu(std::int64_t cols) {
  MirroredArray<float> sums(static_cast<std::size_t>(cols), DType::f32);
  sums.host.assign(sums.host.size(), std::numeric_limits<float>::quiet_NaN());
  sums.upload();
  return sums;
}

struct BiasCase {
  std::int64_t rows;
  std::int64_t cols;
  std::size_t offset;  // elements off the allocation's 256-byte alignment
  bool rematerialize;
  GeluForm form;
};

void check_bias_grad(const BiasCase& c, std::uint64_t seed) {
  const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " offset " +
                           std::to_string(c.offset) + (c.rematerialize ? " rematerializing" : "") +
                           (c.form == GeluForm::tanh ? " tanh" : " exact");
  SCOPED_TRACE(what);
  const Stream stream(testing::gpu());
  Workspace workspace(stream, testing::all_workspace_needs());
  const auto n = static_cast<std::size_t>(c.rows * c.cols);
  const auto count = static_cast<std::int64_t>(n);
  auto x = testing::bf16_bits_on_gpu(testing::normal_bf16(n, seed, 0.0, 2.5), c.offset);
  const std::vector<std::uint16_t> d_out = testing::normal_bf16(n, seed + 1, 0.0, 1.0);

  // The plain backward, and the forward for the rematerialised output.
  auto plain = testing::bf16_bits_on_gpu(d_out, c.offset);
  gelu_backward(plain.device_view(), x.device_view(), plain.device_view(), count, c.form, stream);
  MirroredArray<std::uint16_t> forward(n, DType::bf16, c.offset);
  gelu_forward(x.device_view(), forward.device_view(), count, c.form, stream);

  std::vector<float> first_sums;
  for (int run = 0; run < 2; ++run) {
    auto d_x = testing::bf16_bits_on_gpu(d_out, c.offset);  // in place, as the model runs it
    MirroredArray<std::uint16_t> out(n, DType::bf16, c.offset);
    auto d_bias = nan_sums_on_gpu(c.cols);
    gelu_backward(d_x.device_view(), x.device_view(), d_x.device_view(), count, c.form, stream,
                  c.rematerialize ? out.device_view() : Tensor{}, {d_bias.device_view(), c.cols, &workspace});
    stream.synchronize();
    const std::vector<std::uint16_t> grad = d_x.download();
    ASSERT_EQ(grad, plain.download()) << "gradient next to the bias sums";
    if (c.rematerialize) {
      ASSERT_EQ(out.download(), forward.download()) << "rematerialised output";
    }
    check_run_sums(run, d_bias.download(), first_sums, grad, c.rows, c.cols);
  }
}

TEST(CudaGelu, BackwardSumsTheBiasGradient) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<BiasCase> cases = {
      {16384, 3072, 0, false, GeluForm::exact},  // GPT-3 126M's up projection: 8 x 2048 tokens
      {16384, 3072, 0, true, GeluForm::exact},   // with selective recomputation
      {1000, 264, 0, true, GeluForm::tanh},      // a partial block of columns
      {20, 16, 0, false, GeluForm::exact},       // fewer rows than a slice's minimum: one slice
      {300, 24, 1, false, GeluForm::exact},      // unaligned: the plain kernel, then column sums
      {300, 36, 0, true, GeluForm::tanh},        // rows of no whole 16-byte groups: the same
  };
  std::uint64_t seed = 71;
  for (const BiasCase& c : cases) {
    check_bias_grad(c, seed);
    seed += 2;
  }
}

struct DropoutBiasCase {
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t sample_rows;     // rows of a sample: sample_numel = sample_rows * cols
  std::uint64_t first_element;  // where the rows start in the flattened batch
  float probability;
};

void check_dropout_bias_grad(const DropoutBiasCase& c, std::uint64_t seed) {
  const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " sample rows " +
                           std::to_string(c.sample_rows) + " first element " + std::to_string(c.first_element) + " p " +
                           std::to_string(c.probability);
  SCOPED_TRACE(what);
  const Stream stream(testing::gpu());
  Workspace workspace(stream, testing::all_workspace_needs());
  const auto n = static_cast<std::size_t>(c.rows * c.cols);
  const auto count = static_cast<std::int64_t>(n);
  const std::vector<std::uint16_t> in = testing::normal_bf16(n, seed, 0.0, 1.0);
  DropoutArgs args;
  args.probability = c.probability;
  args.seed = 1234;
  args.first_sample_index = 3;
  args.site = 5;
  args.first_element = c.first_element;
  const std::int64_t sample_numel = c.sample_rows * c.cols;

  auto plain_in = testing::bf16_bits_on_gpu(in, 0);
  MirroredArray<std::uint16_t> plain(n, DType::bf16);
  dropout(plain_in.device_view(), plain.device_view(), count, sample_numel, args, stream);
  // The second run reads part of the first sample index from GPU memory, as a recorded pass does.
  MirroredArray<std::uint64_t> offset(1, DType::i64);
  offset.host[0] = 2;
  offset.upload();
  DropoutArgs split = args;
  split.first_sample_index = 1;
  split.sample_offset = static_cast<const std::uint64_t*>(offset.device_view().data);
  std::vector<float> first_sums;
  for (int run = 0; run < 2; ++run) {
    auto in_gpu = testing::bf16_bits_on_gpu(in, 0);
    MirroredArray<std::uint16_t> out(n, DType::bf16);
    auto d_bias = nan_sums_on_gpu(c.cols);
    dropout(in_gpu.device_view(), out.device_view(), count, sample_numel, run == 0 ? args : split, stream,
            {d_bias.device_view(), c.cols, &workspace});
    stream.synchronize();
    const std::vector<std::uint16_t> values = out.download();
    ASSERT_EQ(values, plain.download()) << "dropout next to the bias sums";
    check_run_sums(run, d_bias.download(), first_sums, values, c.rows, c.cols);
  }
}

TEST(CudaDropout, SumsTheBiasGradient) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<DropoutBiasCase> cases = {
      {16384, 768, 2048, 0, 0.1f},        // GPT-3 126M's residual branches: 8 x 2048 tokens
      {1000, 264, 100, 264 * 300, 0.3f},  // a partial block of columns, a shard starting at row 300
      {300, 24, 50, 4, 0.1f},             // a shard starting off a whole 8-element run: dropout, then sums
      {300, 36, 10, 0, 0.5f},             // rows of no whole 16-byte groups: the same
      {500, 64, 50, 0, 0.0f},             // no dropout: a copy, then sums
  };
  std::uint64_t seed = 91;
  for (const DropoutBiasCase& c : cases) check_dropout_bias_grad(c, seed++);
}

}  // namespace
}  // namespace adamant::kernels
