// The CUDA residual add and layernorm (kernels/residual_layernorm.h) against the three
// kernels it stands for, run on the same GPU: the sum, the normalised rows and the
// statistics bit for bit (the fused kernel rounds and sums as they do). And against the
// CPU: the sum bit for bit equal to bf16(x + bf16(the CPU dropout's value)), the
// statistics and the normalised rows within cuda_pointwise_test.cpp's layernorm
// tolerances (fp32 sums in another order; bf16 rounding of the output). Its backward
// against the layernorm backward and the dropout (or column sums) run one after the other
// on the GPU: the stream's gradient, the branch's and the layernorm's parameter gradients
// bit for bit, the branch bias's sums within fp32 rounding of another order; and the
// branch's gradient against the CPU's dropout of the stream's, its bias against fp64 sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/residual_layernorm.h"
#include "kernels/cuda_test_util.h"
#include "kernels/model_kernels_test_util.h"
#include "kernels/workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::bf16_bits_on_gpu;
using testing::bf16_values;
using testing::MirroredArray;
using testing::normal_bf16;
using testing::view;

// The dropout of `site` over a shard of rows from row first_row of a batch whose first
// sample is first_sample.
DropoutArgs shard_dropout(float probability, std::uint64_t seed, std::uint64_t first_sample, std::uint32_t site,
                          std::int64_t first_row, std::int64_t cols) {
  DropoutArgs args;
  args.probability = probability;
  args.seed = seed;
  args.first_sample_index = first_sample;
  args.site = site;
  args.first_element = static_cast<std::uint64_t>(first_row * cols);
  return args;
}

// `args` as a kernel launches it: with in_memory, part of the first sample index in GPU
// memory (`offset`), as a recorded pass has it.
DropoutArgs launched(const DropoutArgs& args, bool in_memory, MirroredArray<std::uint64_t>& offset) {
  if (!in_memory) return args;
  DropoutArgs split = args;
  split.first_sample_index -= offset.host[0];
  split.sample_offset = static_cast<const std::uint64_t*>(offset.device_view().data);
  return split;
}

// The rows a case runs over and the dropout it draws: what the forward's and the backward's
// cases share.
struct RowsCase {
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t rows_per_sample;
  std::int64_t first_row;  // of the batch: a sequence-parallel shard's
  std::size_t offset;      // elements into the allocations: 1 forbids 16-byte accesses
  float probability;
  bool offset_in_memory;  // part of the first sample index in GPU memory, as a recorded pass has it

  std::size_t numel() const { return static_cast<std::size_t>(rows * cols); }
  std::int64_t sample_numel() const { return rows_per_sample * cols; }
  RowsShape shape() const { return {rows, cols}; }
  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + " sample rows " + std::to_string(rows_per_sample) +
           " from row " + std::to_string(first_row) + " p " + std::to_string(probability) +
           (offset ? " unaligned" : "") + (offset_in_memory ? " offset in memory" : "");
  }
};

struct Case : RowsCase {
  bool in_place;  // the sum over the branch
};

struct Outputs {
  std::vector<std::uint16_t> residual;
  std::vector<std::uint16_t> out;
  std::vector<float> mean;
  std::vector<float> rstd;
};

TEST(CudaResidualLayernorm, MatchesTheThreeKernelsBitForBitAndTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  const std::vector<Case> cases = {
      {{512, 768, 128, 0, 0, 0.1f, false}, false},    // GPT-3 126M's rows, dropout
      {{512, 768, 128, 0, 0, 0.0f, false}, false},    // no dropout
      {{300, 2048, 100, 7, 0, 0.3f, true}, true},     // a shard from inside a sample, over the branch
      {{64, 1024, 16, 0, 0, 0.1f, true}, false},      //
      {{8192, 768, 2048, 0, 0, 0.1f, false}, false},  // more rows than the grid has warps
      {{37, 100, 37, 0, 0, 0.1f, false}, false},      // rows of 100: the three kernels run
      {{19, 1000, 19, 0, 1, 0.1f, false}, false},     // unaligned: the three kernels run
      {{50, 1000, 50, 0, 0, 0.1f, false}, false},     // dropout, lanes' last vectors short: read again each pass
      {{50, 1000, 50, 0, 0, 0.0f, false}, false},     // rows held in registers, lanes' last vectors short
      {{64, 1024, 64, 0, 0, 0.0f, false}, false},     // four vectors a lane held
      {{64, 1536, 64, 0, 0, 0.0f, false}, false},     // six vectors a lane held
      {{40, 2048, 20, 3, 0, 0.0f, true}, true},       // eight vectors a lane held, a shard, over the branch
      {{16, 4096, 16, 0, 0, 0.0f, false}, false},     // longer than the rows held: read again each pass
  };
  MirroredArray<std::uint64_t> sample_offset(1, DType::i64);
  sample_offset.host[0] = 1000;
  sample_offset.upload();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name() + (c.in_place ? " in place" : ""));
    const std::size_t n = c.numel(), cols = static_cast<std::size_t>(c.cols), rows = static_cast<std::size_t>(c.rows);
    const std::int64_t sample_numel = c.sample_numel();
    const RowsShape shape = c.shape();
    const std::vector<std::uint16_t> x = normal_bf16(n, 1, 0.2, 1.0), branch = normal_bf16(n, 2, 0.0, 0.5),
                                     weight = normal_bf16(cols, 3, 1.0, 0.1), bias = normal_bf16(cols, 4, 0.0, 0.1);
    const DropoutArgs args = shard_dropout(c.probability, 0x1234abcd5678ull, 5000, 9, c.first_row, c.cols);
    const DropoutArgs launch_args = launched(args, c.offset_in_memory, sample_offset);

    auto run = [&](bool fused) {
      auto x_gpu = bf16_bits_on_gpu(x, c.offset), branch_gpu = bf16_bits_on_gpu(branch, c.offset),
           weight_gpu = bf16_bits_on_gpu(weight, c.offset), bias_gpu = bf16_bits_on_gpu(bias, c.offset);
      MirroredArray<std::uint16_t> residual_gpu(n, DType::bf16, c.offset), out_gpu(n, DType::bf16, c.offset);
      MirroredArray<float> mean_gpu(rows, DType::f32), rstd_gpu(rows, DType::f32);
      MirroredArray<std::uint16_t>& sum = c.in_place ? branch_gpu : residual_gpu;
      if (fused) {
        residual_layernorm_forward(x_gpu.device_view(), {branch_gpu.device_view(), launch_args, sample_numel},
                                   sum.device_view(), {weight_gpu.device_view(), bias_gpu.device_view(), 1e-5},
                                   out_gpu.device_view(), mean_gpu.device_view(), rstd_gpu.device_view(), shape,
                                   stream);
      } else {
        dropout(branch_gpu.device_view(), sum.device_view(), c.rows * c.cols, sample_numel, launch_args, stream);
        residual_add(x_gpu.device_view(), sum.device_view(), sum.device_view(), c.rows * c.cols, stream);
        layernorm_forward(sum.device_view(), weight_gpu.device_view(), bias_gpu.device_view(), 1e-5,
                          out_gpu.device_view(), mean_gpu.device_view(), rstd_gpu.device_view(), shape, stream);
      }
      stream.synchronize();
      return Outputs{sum.download(), out_gpu.download(), mean_gpu.download(), rstd_gpu.download()};
    };
    const Outputs fused = run(true);
    const Outputs three = run(false);
    testing::expect_bitwise_equal(fused.residual, three.residual, "residual");
    testing::expect_bitwise_equal(fused.out, three.out, "out");
    testing::expect_bitwise_equal(fused.mean, three.mean, "mean");
    testing::expect_bitwise_equal(fused.rstd, three.rstd, "rstd");

    // The CPU: dropout in fp32 on the branch's values, each step rounded to bf16 as stored.
    std::vector<float> branch_f32 = bf16_values(branch), dropped(n);
    cpu::dropout(view(branch_f32), view(dropped), c.rows * c.cols, sample_numel, args);
    std::vector<std::uint16_t> sum_bits(n);
    std::size_t zeros = 0;
    for (std::size_t i = 0; i < n; ++i) {
      zeros += dropped[i] == 0.0f ? 1 : 0;
      sum_bits[i] = f32_to_bf16(bf16_to_f32(x[i]) + bf16_to_f32(f32_to_bf16(dropped[i])));
    }
    testing::expect_bitwise_equal(fused.residual, sum_bits, "residual against the CPU");
    if (c.probability > 0.0f && n > 100000) {
      EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(n), c.probability, 0.01);
    }
    std::vector<float> sum = bf16_values(sum_bits), weight_f32 = bf16_values(weight), bias_f32 = bf16_values(bias),
                       out(n), mean(rows), rstd(rows);
    cpu::layernorm_forward(view(sum), view(weight_f32), view(bias_f32), 1e-5, view(out), view(mean), view(rstd), shape);
    const std::vector<float> gpu_out = bf16_values(fused.out);
    std::size_t outside = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      outside += std::abs(fused.mean[r] - mean[r]) <= 1e-5 + 1e-5 * std::abs(mean[r]) ? 0 : 1;
      outside += std::abs(fused.rstd[r] - rstd[r]) <= 1e-5 * std::abs(rstd[r]) ? 0 : 1;
    }
    for (std::size_t i = 0; i < n; ++i) {
      outside += std::abs(gpu_out[i] - out[i]) <= 5e-3 * std::abs(out[i]) + 1e-4 ? 0 : 1;
    }
    EXPECT_EQ(outside, 0u) << "statistics or normalised values outside the CPU's tolerance";
  }
}

struct BackwardCase : RowsCase {
  bool with_bias;  // the branch has a bias whose gradient the backward sums
};

struct BackwardOutputs {
  std::vector<std::uint16_t> d_residual;
  std::vector<std::uint16_t> d_branch;
  std::vector<float> d_weight;
  std::vector<float> d_bias;
  std::vector<float> branch_bias;
};

TEST(CudaResidualLayernorm, BackwardMatchesTheSeparateKernelsAndTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  Workspace workspace(stream, testing::all_workspace_needs());
  const std::vector<BackwardCase> cases = {
      {{16384, 768, 2048, 0, 0, 0.1f, false}, true},  // GPT-3 126M's rows, an attention or MLP branch
      {{16384, 768, 2048, 0, 0, 0.1f, true}, false},  // the embedding's branch: dropout, no bias
      {{4096, 2048, 2048, 0, 0, 0.0f, false}, true},  // no dropout: the stream's gradient is the branch's
      {{512, 768, 128, 0, 0, 0.0f, false}, false},    // neither: the layernorm backward alone
      {{300, 2048, 100, 7, 0, 0.3f, true}, true},     // a shard from inside a sample
      {{70001, 64, 70001, 0, 0, 0.2f, false}, true},  // more chunks than 1024, long ones
      {{64, 1000, 32, 0, 0, 0.1f, false}, true},      // 125 vectors: the last threads hold none
      {{48, 5120, 3, 0, 0, 0.1f, true}, true},        // two vectors a thread, samples inside a chunk
      {{40, 4104, 8, 5, 0, 0.1f, false}, false},      // the last thread's second vector past the row
      {{24, 8192, 24, 0, 0, 0.0f, false}, true},      // the longest rows held in registers
      {{20, 8200, 10, 0, 0, 0.1f, false}, true},      // longer rows: the tile kernel
      {{37, 100, 37, 0, 0, 0.1f, false}, true},       // rows of 100: the separate kernels run
      {{19, 1000, 19, 0, 1, 0.1f, false}, true},      // unaligned: the separate kernels run
  };
  MirroredArray<std::uint64_t> sample_offset(1, DType::i64);
  sample_offset.host[0] = 1000;
  sample_offset.upload();
  for (const BackwardCase& c : cases) {
    SCOPED_TRACE(c.name() + (c.with_bias ? " bias" : ""));
    const std::size_t n = c.numel(), cols = static_cast<std::size_t>(c.cols), rows = static_cast<std::size_t>(c.rows);
    const std::int64_t sample_numel = c.sample_numel();
    const RowsShape shape = c.shape();
    const std::vector<std::uint16_t> x = normal_bf16(n, 11, 0.1, 1.0), d_out = normal_bf16(n, 12, 0.0, 1.0),
                                     weight = normal_bf16(cols, 13, 1.0, 0.1), bias = normal_bf16(cols, 14, 0.0, 0.1),
                                     d_residual = normal_bf16(n, 15, 0.0, 0.5);
    const DropoutArgs args = shard_dropout(c.probability, 0x5eed0fba5eull, 3000, 11, c.first_row, c.cols);
    const DropoutArgs launch_args = launched(args, c.offset_in_memory, sample_offset);
    auto x_gpu = bf16_bits_on_gpu(x, c.offset), d_out_gpu = bf16_bits_on_gpu(d_out, c.offset),
         weight_gpu = bf16_bits_on_gpu(weight, c.offset), bias_gpu = bf16_bits_on_gpu(bias, c.offset);
    MirroredArray<std::uint16_t> normalized(n, DType::bf16, c.offset);
    MirroredArray<float> mean(rows, DType::f32), rstd(rows, DType::f32);
    layernorm_forward(x_gpu.device_view(), weight_gpu.device_view(), bias_gpu.device_view(), 1e-5,
                      normalized.device_view(), mean.device_view(), rstd.device_view(), shape, stream);

    auto run = [&](bool fused) {
      auto stream_grad = bf16_bits_on_gpu(d_residual, c.offset);
      MirroredArray<std::uint16_t> d_branch(n, DType::bf16, c.offset);
      MirroredArray<float> d_weight(cols, DType::f32), d_bias(cols, DType::f32), branch_bias(cols, DType::f32);
      const Tensor branch_bias_view = c.with_bias ? branch_bias.device_view() : Tensor{};
      if (fused) {
        residual_layernorm_backward(
            d_out_gpu.device_view(), x_gpu.device_view(), weight_gpu.device_view(), mean.device_view(),
            rstd.device_view(), stream_grad.device_view(), d_weight.device_view(), d_bias.device_view(),
            {d_branch.device_view(), launch_args, sample_numel, branch_bias_view}, shape, workspace, stream);
      } else {
        layernorm_backward(d_out_gpu.device_view(), x_gpu.device_view(), weight_gpu.device_view(), mean.device_view(),
                           rstd.device_view(), stream_grad.device_view(), d_weight.device_view(), d_bias.device_view(),
                           shape, workspace, stream);
        if (c.probability > 0.0f) {
          dropout(stream_grad.device_view(), d_branch.device_view(), c.rows * c.cols, sample_numel, launch_args, stream,
                  {branch_bias_view, c.cols, &workspace});
        } else if (c.with_bias) {
          bias_grad(stream_grad.device_view(), branch_bias_view, c.rows, c.cols, workspace, stream);
        }
      }
      stream.synchronize();
      return BackwardOutputs{stream_grad.download(),
                             c.probability > 0.0f ? d_branch.download() : stream_grad.download(), d_weight.download(),
                             d_bias.download(), c.with_bias ? branch_bias.download() : std::vector<float>{}};
    };
    const BackwardOutputs fused = run(true);
    const BackwardOutputs separate = run(false);
    testing::expect_bitwise_equal(fused.d_residual, separate.d_residual, "d_residual");
    testing::expect_bitwise_equal(fused.d_branch, separate.d_branch, "d_branch");
    testing::expect_bitwise_equal(fused.d_weight, separate.d_weight, "d_weight");
    testing::expect_bitwise_equal(fused.d_bias, separate.d_bias, "d_bias");

    // The CPU: the dropout of the stream's gradient as stored, rounded as stored; the
    // bias's sums of the branch's gradient in fp64.
    std::vector<float> stream_f32 = bf16_values(fused.d_residual), dropped(n);
    if (c.probability > 0.0f) {
      cpu::dropout(view(stream_f32), view(dropped), c.rows * c.cols, sample_numel, args);
      std::vector<std::uint16_t> dropped_bits(n);
      for (std::size_t i = 0; i < n; ++i) dropped_bits[i] = f32_to_bf16(dropped[i]);
      testing::expect_bitwise_equal(fused.d_branch, dropped_bits, "d_branch against the CPU");
    }
    if (!c.with_bias) continue;
    std::vector<double> sums(cols, 0.0), magnitudes(cols, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const double g = bf16_to_f32(fused.d_branch[i]);
      sums[i % cols] += g;
      magnitudes[i % cols] += std::abs(g);
    }
    std::size_t outside = 0;
    for (std::size_t col = 0; col < cols; ++col) {
      const double tolerance = 1e-5 * magnitudes[col] + 1e-6;
      outside += std::abs(fused.branch_bias[col] - sums[col]) <= tolerance ? 0 : 1;
      outside += std::abs(separate.branch_bias[col] - sums[col]) <= tolerance ? 0 : 1;
    }
    EXPECT_EQ(outside, 0u) << "branch bias sums outside fp32 rounding of the fp64 sums";
  }
}

}  // namespace
}  // namespace adamant::kernels
