// CUDA causal attention against the CPU reference kernels (kernels/cpu): random
// inputs rounded to bf16, the CPU kernel in fp32 on the rounded values, the CUDA
// kernel on the bf16 copies. Shapes of GPT-3 126M and 1.3B heads (64 and 128 wide),
// a sequence of 2048, and odd lengths that end inside a 64-row block, with and
// without attention dropout (whose mask must be the CPU's exactly).
//
// Tolerances follow from bf16 rounding, which is at most 2^-8 of a value. The GPU
// rounds each product operand it feeds to the tensor cores (probabilities times the
// dropout factor, score gradients) and each output, and sums in fp32, so an output
// y = sum_t a_t b_t differs from the fp32 reference by at most
// 2^-8 (|y| + sum_t |a_t b_t|) plus fp32 noise; the tests compute that bound per
// element from the reference's own values and allow 1.5 times it plus 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/cuda/model_kernels_cuda.h"
#include "kernels/cuda_attention_test_util.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels {
namespace {

using namespace attention_testing;  // NOLINT: the shared test helpers

class CudaAttention : public ::testing::TestWithParam<AttentionCase> {
 protected:
  void SetUp() override {
    ADAMANT_REQUIRE_GPU();
    shape_ = GetParam().shape;
    dropout_ = DropoutArgs{GetParam().dropout, 0x1234abcd5678ull, 3, 7};
    tokens_ = shape_.batch * shape_.seq;
    channels_ = shape_.heads * shape_.head_dim;
    probs_numel_ = shape_.batch * shape_.heads * shape_.seq * shape_.seq;
    qkv_ = random_bf16_values(static_cast<std::size_t>(tokens_ * 3 * channels_), 11, 1.0);
  }
  std::int64_t qkv_index(std::int64_t b, std::int64_t t, std::int64_t part, std::int64_t h, std::int64_t d) const {
    return (b * shape_.seq + t) * 3 * channels_ + part * channels_ + h * shape_.head_dim + d;
  }
  std::int64_t probs_index(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return ((b * shape_.heads + h) * shape_.seq + i) * shape_.seq + j;
  }

  AttentionShape shape_;
  DropoutArgs dropout_;
  std::int64_t tokens_ = 0, channels_ = 0, probs_numel_ = 0;
  std::vector<float> qkv_;
};

TEST_P(CudaAttention, ForwardMatchesCpu) {
  const Stream stream(testing::gpu());
  std::vector<float> probs(probs_numel_), out(tokens_ * channels_);
  cpu::attention_forward(host_tensor(qkv_), host_tensor(probs), host_tensor(out), shape_, dropout_);
  // sum_j p_j f_j |v_j|: the reference run on |v| (the bound's magnitude term).
  std::vector<float> qkv_abs_v = qkv_;
  for (std::int64_t b = 0; b < shape_.batch; ++b) {
    for (std::int64_t t = 0; t < shape_.seq; ++t) {
      for (std::int64_t c = 0; c < channels_; ++c) {
        float& v = qkv_abs_v[qkv_index(b, t, 2, 0, c)];
        v = std::abs(v);
      }
    }
  }
  std::vector<float> probs_unused(probs_numel_), out_magnitude(tokens_ * channels_);
  cpu::attention_forward(host_tensor(qkv_abs_v), host_tensor(probs_unused), host_tensor(out_magnitude), shape_,
                         dropout_);

  auto qkv_gpu = upload_bf16(qkv_);
  auto probs_gpu = poisoned_bf16(probs.size());
  auto out_gpu = poisoned_bf16(out.size());
  cuda::attention_forward(qkv_gpu.device_view(), probs_gpu.device_view(), out_gpu.device_view(), shape_, dropout_,
                          stream);
  stream.synchronize();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);

  // Probabilities: only their own rounding (no magnitude term); the future exactly 0.
  const std::vector<float> probs_result = download_floats(probs_gpu);
  expect_within_bf16_bound(probs_result, probs, std::vector<double>(probs.size(), 0.0), "probs");
  std::size_t future_nonzero = 0;
  for (std::int64_t row = 0; row < shape_.batch * shape_.heads * shape_.seq; ++row) {
    for (std::int64_t j = row % shape_.seq + 1; j < shape_.seq; ++j) {
      if (probs_result[row * shape_.seq + j] != 0.0f) ++future_nonzero;
    }
  }
  EXPECT_EQ(future_nonzero, 0u) << "probabilities of future keys must be exactly 0";

  const std::vector<double> magnitude(out_magnitude.begin(), out_magnitude.end());
  expect_within_bf16_bound(download_floats(out_gpu), out, magnitude, "out");
}

TEST_P(CudaAttention, BackwardMatchesCpu) {
  const Stream stream(testing::gpu());
  // Both sides take the same bf16 probabilities: the CPU forward's, rounded.
  std::vector<float> probs(probs_numel_), out(tokens_ * channels_);
  cpu::attention_forward(host_tensor(qkv_), host_tensor(probs), host_tensor(out), shape_, dropout_);
  for (float& p : probs) p = bf16_to_f32(f32_to_bf16(p));
  std::vector<float> d_out = random_bf16_values(static_cast<std::size_t>(tokens_ * channels_), 12, 1.0);
  std::vector<float> d_probs(probs_numel_), d_qkv(qkv_.size());
  cpu::attention_backward(host_tensor(d_out), host_tensor(qkv_), host_tensor(probs), host_tensor(d_probs),
                          host_tensor(d_qkv), shape_, dropout_);

  // The bound's magnitude terms: dq_i = sum_j ds_ij k_j, dk_j = sum_i ds_ij q_i and
  // dv_j = sum_i p_ij f_ij d_out_i, each with absolute values. d_probs holds the
  // reference's dp (through the dropout), from which ds = p (dp - sum p dp) / sqrt(d).
  std::vector<double> magnitude(qkv_.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape_.head_dim));
  for (std::int64_t b = 0; b < shape_.batch; ++b) {
    for (std::int64_t h = 0; h < shape_.heads; ++h) {
      for (std::int64_t i = 0; i < shape_.seq; ++i) {
        double weighted_sum = 0.0;
        for (std::int64_t j = 0; j <= i; ++j)
          weighted_sum += probs[probs_index(b, h, i, j)] * d_probs[probs_index(b, h, i, j)];
        for (std::int64_t j = 0; j <= i; ++j) {
          const double p = probs[probs_index(b, h, i, j)];
          const double d_score = std::abs(p * (d_probs[probs_index(b, h, i, j)] - weighted_sum) * scale);
          const double dropped = std::abs(p * dropout_factor(dropout_, shape_, b, h, i, j));
          for (std::int64_t d = 0; d < shape_.head_dim; ++d) {
            magnitude[qkv_index(b, i, 0, h, d)] += d_score * std::abs(qkv_[qkv_index(b, j, 1, h, d)]);
            magnitude[qkv_index(b, j, 1, h, d)] += d_score * std::abs(qkv_[qkv_index(b, i, 0, h, d)]);
            magnitude[qkv_index(b, j, 2, h, d)] +=
                dropped * std::abs(d_out[(b * shape_.seq + i) * channels_ + h * shape_.head_dim + d]);
          }
        }
      }
    }
  }

  auto qkv_gpu = upload_bf16(qkv_);
  auto probs_gpu = upload_bf16(probs);
  auto d_out_gpu = upload_bf16(d_out);
  auto scratch_gpu = poisoned_bf16(probs.size());
  auto d_qkv_gpu = poisoned_bf16(qkv_.size());
  cuda::attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), probs_gpu.device_view(),
                           scratch_gpu.device_view(), d_qkv_gpu.device_view(), shape_, dropout_, stream);
  stream.synchronize();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<std::uint16_t> first_run = d_qkv_gpu.download();
  expect_within_bf16_bound(download_floats(d_qkv_gpu), d_qkv, magnitude, "d_qkv");

  // No atomics: a second run gives the same bits.
  cuda::attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), probs_gpu.device_view(),
                           scratch_gpu.device_view(), d_qkv_gpu.device_view(), shape_, dropout_, stream);
  stream.synchronize();
  testing::expect_bitwise_equal(d_qkv_gpu.download(), first_run, "d_qkv of a second run");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttentionCase{{2, 128, 4, 64}, 0.0f}, AttentionCase{{2, 128, 4, 64}, 0.1f},
                                           AttentionCase{{1, 256, 2, 128}, 0.0f}, AttentionCase{{1, 256, 2, 128}, 0.1f},
                                           AttentionCase{{2, 37, 3, 64}, 0.0f}, AttentionCase{{2, 37, 3, 64}, 0.1f},
                                           AttentionCase{{1, 100, 2, 128},
                                                         0.1f},  // a partial second block, rows not 16-byte aligned
                                           AttentionCase{{1, 192, 16, 128}, 0.0f},  // the heads of GPT-3 1.3B
                                           AttentionCase{{1, 2048, 1, 64}, 0.1f}),  // the full sequence length
                         case_name);

TEST(CudaAttentionErrors, UnsupportedHeadDimIsAnError) {
  ADAMANT_REQUIRE_GPU();
  const AttentionShape shape{1, 16, 2, 32};
  MirroredArray<std::uint16_t> qkv(16 * 3 * 64, DType::bf16), probs(2 * 16 * 16, DType::bf16),
      out(16 * 64, DType::bf16);
  const Stream stream(testing::gpu());
  try {
    cuda::attention_forward(qkv.device_view(), probs.device_view(), out.device_view(), shape, {}, stream);
    FAIL() << "head_dim 32 was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("head_dim 32"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace adamant::kernels
