// The CUDA residual add and layernorm (kernels/residual_layernorm.h) against the three
// kernels it stands for, run on the same GPU: the sum, the normalised rows and the
// statistics bit for bit (the fused kernel rounds and sums as they do). And against the
// CPU: the sum bit for bit equal to bf16(x + bf16(the CPU dropout's value)), the
// statistics and the normalised rows within cuda_pointwise_test.cpp's layernorm
// tolerances (fp32 sums in another order; bf16 rounding of the output).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/residual_layernorm.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels {
namespace {

using testing::bf16_bits_on_gpu;
using testing::MirroredArray;
using testing::normal_bf16;

std::vector<float> to_f32(const std::vector<std::uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_f32(bits[i]);
  return values;
}

Tensor cpu_view(std::vector<float>& values) {
  return Tensor::flat(values.data(), DType::f32, Device::cpu(), values.size());
}

struct Case {
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t rows_per_sample;
  std::int64_t first_row;  // of the batch: a sequence-parallel shard's
  std::size_t offset;      // elements into the allocations: 1 forbids 16-byte accesses
  float probability;
  bool in_place;          // the sum over the branch
  bool offset_in_memory;  // part of the first sample index in GPU memory, as a recorded pass has it
};

std::string name_of(const Case& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.cols) + " sample rows " + std::to_string(c.rows_per_sample) +
         " from row " + std::to_string(c.first_row) + " p " + std::to_string(c.probability) +
         (c.offset ? " unaligned" : "") + (c.in_place ? " in place" : "") +
         (c.offset_in_memory ? " offset in memory" : "");
}

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
      {512, 768, 128, 0, 0, 0.1f, false, false},    // GPT-3 126M's rows, dropout
      {512, 768, 128, 0, 0, 0.0f, false, false},    // no dropout
      {300, 2048, 100, 7, 0, 0.3f, true, true},     // a shard from inside a sample, over the branch
      {64, 1024, 16, 0, 0, 0.1f, false, true},      //
      {8192, 768, 2048, 0, 0, 0.1f, false, false},  // more rows than the grid has warps
      {37, 100, 37, 0, 0, 0.1f, false, false},      // rows of 100: the three kernels run
      {19, 1000, 19, 0, 1, 0.1f, false, false},     // unaligned: the three kernels run
  };
  MirroredArray<std::uint64_t> sample_offset(1, DType::i64);
  sample_offset.host[0] = 1000;
  sample_offset.upload();
  for (const Case& c : cases) {
    SCOPED_TRACE(name_of(c));
    const auto n = static_cast<std::size_t>(c.rows * c.cols);
    const auto cols = static_cast<std::size_t>(c.cols);
    const auto rows = static_cast<std::size_t>(c.rows);
    const std::int64_t sample_numel = c.rows_per_sample * c.cols;
    const RowsShape shape{c.rows, c.cols};
    const std::vector<std::uint16_t> x = normal_bf16(n, 1, 0.2, 1.0), branch = normal_bf16(n, 2, 0.0, 0.5),
                                     weight = normal_bf16(cols, 3, 1.0, 0.1), bias = normal_bf16(cols, 4, 0.0, 0.1);
    DropoutArgs args;
    args.probability = c.probability;
    args.seed = 0x1234abcd5678ull;
    args.first_sample_index = 5000;
    args.site = 9;
    args.first_element = static_cast<std::uint64_t>(c.first_row * c.cols);
    DropoutArgs launch_args = args;
    if (c.offset_in_memory) {
      launch_args.first_sample_index -= sample_offset.host[0];
      launch_args.sample_offset = static_cast<const std::uint64_t*>(sample_offset.device_view().data);
    }

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
    std::vector<float> branch_f32 = to_f32(branch), dropped(n);
    cpu::dropout(cpu_view(branch_f32), cpu_view(dropped), c.rows * c.cols, sample_numel, args);
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
    std::vector<float> sum = to_f32(sum_bits), weight_f32 = to_f32(weight), bias_f32 = to_f32(bias), out(n), mean(rows),
                       rstd(rows);
    cpu::layernorm_forward(cpu_view(sum), cpu_view(weight_f32), cpu_view(bias_f32), 1e-5, cpu_view(out), cpu_view(mean),
                           cpu_view(rstd), shape);
    const std::vector<float> gpu_out = to_f32(fused.out);
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

}  // namespace
}  // namespace adamant::kernels
