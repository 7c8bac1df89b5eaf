// CUDA flash attention against the CPU reference kernels (kernels/cpu): random
// inputs rounded to bf16, the CPU kernels in fp32 on the rounded values, the CUDA
// kernels on the bf16 copies; logsumexp against a double-precision softmax
// denominator computed here. Head sizes 64, 80, 96 and 128, sequences of 2048, a
// single token, lengths that end inside a 128-row block of the kernels or exactly at
// or just past one of their 64-row streamed tiles, batch 1 to 3, with and without
// attention dropout (whose mask must be the CPU's exactly). Each head size lays its tiles
// out in its own swizzle width (kernels/cuda/wgmma.cuh: 128 bytes at 64 and 128, 64 at 96,
// 32 at 80).
//
// Tolerances follow from bf16 rounding (at most 2^-8 of a value): the GPU rounds each tensor-core operand it makes
// (unnormalised probabilities times the dropout factor, score gradients) and each
// output, and sums in fp32, so y = sum_t a_t b_t differs from the fp32 reference by
// at most 2^-8 (|y| + sum_t |a_t b_t|); the tests allow 1.5 times that plus 1e-5.
// Backward also takes D = rowsum(d_out o) from the bf16 output, off by at most
// 2^-8 sum_d |d_out_d o_d|, which enters ds_ij = p_ij (dp_ij - D_i) / sqrt(d) linearly
// and is added to the magnitude terms of dq and dk.
// logsumexp is fp32 throughout: n-term sums and head_dim-term dot products in fp32
// are off by at most n 2^-24 relative, so |error| <= 4 * 2^-24 (row length + 1 +
// head_dim * max_j |q_i|.|k_j| / sqrt(d) + |lse|) + 1e-6.
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
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/flash_attention.h"
#include "kernels/cuda_attention_test_util.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels {
namespace {

constexpr double kFp32Rounding = 1.0 / 16777216.0;  // 2^-24
using FlashCase = attention_testing::AttentionCase;
using namespace attention_testing;  // NOLINT: the shared test helpers

// Logsumexp of every row in double, and its fp32 error bound (see the top of the file).
struct LogsumexpReference {
  std::vector<float> value;
  std::vector<double> bound;
};

LogsumexpReference reference_logsumexp(const std::vector<float>& qkv, const AttentionShape& s) {
  const std::int64_t C = s.heads * s.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  LogsumexpReference reference;
  reference.value.resize(static_cast<std::size_t>(s.batch * s.heads * s.seq));
  reference.bound.resize(reference.value.size());
  std::vector<double> scores(static_cast<std::size_t>(s.seq));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      for (std::int64_t i = 0; i < s.seq; ++i) {
        const float* q = qkv.data() + (b * s.seq + i) * 3 * C + h * s.head_dim;
        double row_max = -INFINITY, largest_abs_dot = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) {
          const float* k = qkv.data() + (b * s.seq + j) * 3 * C + C + h * s.head_dim;
          double dot = 0.0, abs_dot = 0.0;
          for (std::int64_t d = 0; d < s.head_dim; ++d) {
            dot += static_cast<double>(q[d]) * k[d];
            abs_dot += std::abs(static_cast<double>(q[d]) * k[d]);
          }
          scores[j] = dot * scale;
          row_max = std::max(row_max, scores[j]);
          largest_abs_dot = std::max(largest_abs_dot, abs_dot * scale);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(scores[j] - row_max);
        const double lse = row_max + std::log(sum);
        const std::size_t row = static_cast<std::size_t>((b * s.heads + h) * s.seq + i);
        reference.value[row] = static_cast<float>(lse);
        reference.bound[row] =
            4.0 * kFp32Rounding * (static_cast<double>(i + 2) + s.head_dim * largest_abs_dot + std::abs(lse)) + 1e-6;
      }
    }
  }
  return reference;
}

// All but one of args' first sample index, in GPU memory; split_sample_index gives the args
// that read it there.
testing::MirroredArray<std::uint64_t> sample_offset_on_gpu(const DropoutArgs& args) {
  testing::MirroredArray<std::uint64_t> offset(1, DType::i64);
  offset.host[0] = args.first_sample_index - 1;
  offset.upload();
  return offset;
}
DropoutArgs split_sample_index(const DropoutArgs& args, testing::MirroredArray<std::uint64_t>& offset) {
  DropoutArgs split = args;
  split.first_sample_index = 1;
  split.sample_offset = static_cast<const std::uint64_t*>(offset.device_view().data);
  return split;
}

class CudaFlashAttention : public ::testing::TestWithParam<FlashCase> {
 protected:
  void SetUp() override {
    ADAMANT_REQUIRE_GPU();
    shape_ = GetParam().shape;
    dropout_ = DropoutArgs{GetParam().dropout, 0x1234abcd5678ull, 3, 7};
    tokens_ = shape_.batch * shape_.seq;
    channels_ = shape_.heads * shape_.head_dim;
    rows_ = shape_.batch * shape_.heads * shape_.seq;
    probs_numel_ = rows_ * shape_.seq;
    qkv_ = random_bf16_values(static_cast<std::size_t>(tokens_ * 3 * channels_), 11, 1.0);
  }
  std::int64_t qkv_index(std::int64_t b, std::int64_t t, std::int64_t part, std::int64_t h, std::int64_t d) const {
    return (b * shape_.seq + t) * 3 * channels_ + part * channels_ + h * shape_.head_dim + d;
  }
  std::int64_t out_index(std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t d) const {
    return (b * shape_.seq + t) * channels_ + h * shape_.head_dim + d;
  }
  std::int64_t probs_index(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return ((b * shape_.heads + h) * shape_.seq + i) * shape_.seq + j;
  }

  AttentionShape shape_;
  DropoutArgs dropout_;
  std::int64_t tokens_ = 0, channels_ = 0, rows_ = 0, probs_numel_ = 0;
  std::vector<float> qkv_;
};

TEST_P(CudaFlashAttention, ForwardMatchesCpu) {
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
  std::vector<float> out_magnitude(tokens_ * channels_);
  cpu::attention_forward(host_tensor(qkv_abs_v), host_tensor(probs), host_tensor(out_magnitude), shape_, dropout_);
  const LogsumexpReference logsumexp = reference_logsumexp(qkv_, shape_);

  auto qkv_gpu = bf16_on_gpu(qkv_);
  auto out_gpu = poisoned_bf16(out.size());
  auto logsumexp_gpu = poisoned_floats(static_cast<std::size_t>(rows_));
  flash_attention_forward(qkv_gpu.device_view(), out_gpu.device_view(), logsumexp_gpu.device_view(), shape_, dropout_,
                          stream);
  stream.synchronize();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);

  const std::vector<double> magnitude(out_magnitude.begin(), out_magnitude.end());
  expect_within_bf16_bound(download_floats(out_gpu), out, magnitude, "out");
  expect_within(logsumexp_gpu.download(), logsumexp.value, logsumexp.bound, "logsumexp");

  // The first sample index split between the launch and GPU memory (a recorded pass's)
  // gives the same bits.
  auto offset_gpu = sample_offset_on_gpu(dropout_);
  auto second_gpu = poisoned_bf16(out.size());
  flash_attention_forward(qkv_gpu.device_view(), second_gpu.device_view(), logsumexp_gpu.device_view(), shape_,
                          split_sample_index(dropout_, offset_gpu), stream);
  stream.synchronize();
  testing::expect_bitwise_equal(second_gpu.download(), out_gpu.download(), "out with the sample offset in memory");
}

TEST_P(CudaFlashAttention, BackwardMatchesCpu) {
  const Stream stream(testing::gpu());
  std::vector<float> probs(probs_numel_), out(tokens_ * channels_);
  cpu::attention_forward(host_tensor(qkv_), host_tensor(probs), host_tensor(out), shape_, dropout_);
  // The GPU gets the forward results as the model stores them: out in bf16, logsumexp in fp32.
  for (float& o : out) o = bf16_to_f32(f32_to_bf16(o));
  const LogsumexpReference logsumexp = reference_logsumexp(qkv_, shape_);
  std::vector<float> d_out = random_bf16_values(static_cast<std::size_t>(tokens_ * channels_), 12, 1.0);
  std::vector<float> d_probs(probs_numel_), d_qkv(qkv_.size());
  cpu::attention_backward(host_tensor(d_out), host_tensor(qkv_), host_tensor(probs), host_tensor(d_probs),
                          host_tensor(d_qkv), shape_, dropout_);

  // Magnitude terms: dq_i = sum_j ds_ij k_j, dk_j = sum_i ds_ij q_i, dv_j = sum_i p_ij f_ij d_out_i
  // with absolute values, plus the D error's p_ij / sqrt(d) sum_d |d_out_d o_d| in ds.
  std::vector<double> magnitude(qkv_.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape_.head_dim));
  for (std::int64_t b = 0; b < shape_.batch; ++b) {
    for (std::int64_t h = 0; h < shape_.heads; ++h) {
      for (std::int64_t i = 0; i < shape_.seq; ++i) {
        double weighted_sum = 0.0, d_magnitude = 0.0;
        for (std::int64_t j = 0; j <= i; ++j)
          weighted_sum += probs[probs_index(b, h, i, j)] * d_probs[probs_index(b, h, i, j)];
        for (std::int64_t d = 0; d < shape_.head_dim; ++d)
          d_magnitude += std::abs(static_cast<double>(d_out[out_index(b, i, h, d)]) * out[out_index(b, i, h, d)]);
        for (std::int64_t j = 0; j <= i; ++j) {
          const double p = probs[probs_index(b, h, i, j)];
          const double d_score =
              std::abs(p * (d_probs[probs_index(b, h, i, j)] - weighted_sum) * scale) + p * scale * d_magnitude;
          const double dropped = std::abs(p * dropout_factor(dropout_, shape_, b, h, i, j));
          for (std::int64_t d = 0; d < shape_.head_dim; ++d) {
            magnitude[qkv_index(b, i, 0, h, d)] += d_score * std::abs(qkv_[qkv_index(b, j, 1, h, d)]);
            magnitude[qkv_index(b, j, 1, h, d)] += d_score * std::abs(qkv_[qkv_index(b, i, 0, h, d)]);
            magnitude[qkv_index(b, j, 2, h, d)] += dropped * std::abs(d_out[out_index(b, i, h, d)]);
          }
        }
      }
    }
  }

  auto qkv_gpu = bf16_on_gpu(qkv_);
  auto out_gpu = bf16_on_gpu(out);
  auto d_out_gpu = bf16_on_gpu(d_out);
  auto logsumexp_gpu = f32_on_gpu(logsumexp.value);
  auto d_qkv_gpu = poisoned_bf16(qkv_.size());
  // The row statistics the passes share, poisoned: every one the key pass reads must be written first.
  auto statistics = poisoned_floats(flash_attention_statistics_bytes(shape_) / sizeof(float));
  flash_attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), out_gpu.device_view(),
                           logsumexp_gpu.device_view(), d_qkv_gpu.device_view(), shape_, dropout_, stream,
                           statistics.device_view());
  stream.synchronize();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<std::uint16_t> first_run = d_qkv_gpu.download();
  expect_within_bf16_bound(download_floats(d_qkv_gpu), d_qkv, magnitude, "d_qkv");

  // No atomics: a second run, over a poisoned d_qkv, gives the same bits; so does one whose
  // first sample index is split between the launch and GPU memory (a recorded pass's).
  auto second_gpu = poisoned_bf16(qkv_.size());
  flash_attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), out_gpu.device_view(),
                           logsumexp_gpu.device_view(), second_gpu.device_view(), shape_, dropout_, stream,
                           statistics.device_view());
  stream.synchronize();
  testing::expect_bitwise_equal(second_gpu.download(), first_run, "d_qkv of a second run");
  auto offset_gpu = sample_offset_on_gpu(dropout_);
  auto third_gpu = poisoned_bf16(qkv_.size());
  flash_attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), out_gpu.device_view(),
                           logsumexp_gpu.device_view(), third_gpu.device_view(), shape_,
                           split_sample_index(dropout_, offset_gpu), stream, statistics.device_view());
  stream.synchronize();
  testing::expect_bitwise_equal(third_gpu.download(), first_run, "d_qkv with the sample offset in memory");

  // With a score scratch, the query pass reads the score gradients the key pass stored: dk
  // and dv are the same bits, dq within the same bound, and runs repeat bit for bit, at every
  // head size.
  MirroredArray<std::uint16_t> scores(flash_attention_scores_bytes(shape_) / 2, DType::bf16);
  auto stored_gpu = poisoned_bf16(qkv_.size());
  flash_attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), out_gpu.device_view(),
                           logsumexp_gpu.device_view(), stored_gpu.device_view(), shape_, dropout_, stream,
                           statistics.device_view(), scores.device_view());
  stream.synchronize();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<std::uint16_t> stored_run = stored_gpu.download();
  expect_within_bf16_bound(download_floats(stored_gpu), d_qkv, magnitude, "d_qkv from stored score gradients");
  const std::int64_t channels = shape_.heads * shape_.head_dim;
  for (std::size_t i = 0; i < stored_run.size(); ++i) {
    if (static_cast<std::int64_t>(i) % (3 * channels) < channels) continue;  // dq
    ASSERT_EQ(stored_run[i], first_run[i]) << "dk or dv element " << i << " differs with stored score gradients";
  }
  auto stored_again = poisoned_bf16(qkv_.size());
  flash_attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), out_gpu.device_view(),
                           logsumexp_gpu.device_view(), stored_again.device_view(), shape_, dropout_, stream,
                           statistics.device_view(), scores.device_view());
  stream.synchronize();
  testing::expect_bitwise_equal(stored_again.download(), stored_run, "d_qkv of a second run from stored scores");

  // A scratch for fewer (sample, head) slots than there are runs the passes a group of slots
  // at a time, with the same bits: groups of one, and as even groups as one slot fewer allows.
  const std::int64_t slots = shape_.batch * shape_.heads;
  const std::size_t slot_bytes = flash_attention_scores_bytes(1, 1, shape_.seq);
  for (const std::int64_t held : {std::int64_t{1}, slots - 1}) {
    if (held < 1) continue;
    const Tensor whole = scores.device_view();
    const Tensor part(whole.data, DType::u8, whole.device, {static_cast<std::int64_t>(held * slot_bytes + 16)});
    auto grouped = poisoned_bf16(qkv_.size());
    flash_attention_backward(d_out_gpu.device_view(), qkv_gpu.device_view(), out_gpu.device_view(),
                             logsumexp_gpu.device_view(), grouped.device_view(), shape_, dropout_, stream,
                             statistics.device_view(), part);
    stream.synchronize();
    testing::expect_bitwise_equal(grouped.download(), stored_run,
                                  "d_qkv from a score scratch of " + std::to_string(held) + " slot(s)");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFlashAttention,
                         ::testing::Values(FlashCase{{2, 128, 4, 64}, 0.0f}, FlashCase{{2, 128, 4, 64}, 0.1f},
                                           FlashCase{{1, 256, 2, 128}, 0.0f}, FlashCase{{1, 256, 2, 128}, 0.1f},
                                           FlashCase{{2, 37, 3, 64}, 0.0f}, FlashCase{{2, 37, 3, 64}, 0.1f},
                                           FlashCase{{1, 2048, 2, 64}, 0.0f}, FlashCase{{1, 2048, 2, 64}, 0.1f},
                                           FlashCase{{1, 1000, 2, 128}, 0.0f}, FlashCase{{1, 1000, 2, 128}, 0.1f},
                                           FlashCase{{2, 128, 4, 80}, 0.0f}, FlashCase{{2, 128, 4, 80}, 0.1f},
                                           FlashCase{{1, 300, 2, 96}, 0.0f}, FlashCase{{1, 300, 2, 96}, 0.1f},
                                           FlashCase{{1, 2048, 2, 80}, 0.0f}, FlashCase{{1, 2048, 2, 80}, 0.1f},
                                           FlashCase{{1, 2048, 1, 128}, 0.0f}, FlashCase{{1, 1, 1, 64}, 0.0f},
                                           FlashCase{{1, 1, 2, 80}, 0.1f}, FlashCase{{3, 65, 2, 128}, 0.0f},
                                           FlashCase{{3, 65, 2, 128}, 0.1f}, FlashCase{{2, 192, 3, 96}, 0.0f},
                                           FlashCase{{2, 192, 3, 96}, 0.1f}, FlashCase{{1, 129, 2, 64}, 0.1f},
                                           // Several waves of blocks (768 per pass): not all of a
                                           // head's blocks run at once.
                                           FlashCase{{2, 512, 96, 64}, 0.1f},
                                           // 21 slots: the stored-scores passes' head groups of
                                           // 16 and a short last group of 5.
                                           FlashCase{{3, 256, 7, 128}, 0.1f}),
                         case_name);

TEST(CudaFlashAttentionErrors, UnsupportedHeadDimIsAnError) {
  ADAMANT_REQUIRE_GPU();
  const AttentionShape shape{1, 16, 2, 32};
  MirroredArray<std::uint16_t> qkv(16 * 3 * 64, DType::bf16), out(16 * 64, DType::bf16);
  MirroredArray<float> logsumexp(2 * 16, DType::f32);
  const Stream stream(testing::gpu());
  try {
    flash_attention_forward(qkv.device_view(), out.device_view(), logsumexp.device_view(), shape, {}, stream);
    FAIL() << "head_dim 32 was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("head_dim 32"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("64, 80, 96 or 128"), std::string::npos) << error.what();
  }
}

// 80 (GPT-3 2.7B's 2560 / 32) is a flash head size: the call goes through, and its
// logsumexp is the reference's.
TEST(CudaFlashAttentionErrors, HeadDim80IsAccepted) {
  ADAMANT_REQUIRE_GPU();
  const AttentionShape shape{1, 16, 2, 80};
  const std::vector<float> qkv_values = random_bf16_values(16 * 3 * 2 * 80, 31, 1.0);
  auto qkv = bf16_on_gpu(qkv_values);
  auto out = poisoned_bf16(16 * 2 * 80);
  auto logsumexp = poisoned_floats(2 * 16);
  const Stream stream(testing::gpu());
  EXPECT_NO_THROW(
      flash_attention_forward(qkv.device_view(), out.device_view(), logsumexp.device_view(), shape, {}, stream));
  stream.synchronize();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const LogsumexpReference reference = reference_logsumexp(qkv_values, shape);
  expect_within(logsumexp.download(), reference.value, reference.bound, "logsumexp at head_dim 80");
}

// A score scratch too small for one (sample, head), or misaligned, is refused before anything runs,
// with what it needs; d_qkv keeps its contents. The same holds for the model's call, whose
// scratch is its workspace's.
TEST(CudaFlashAttentionErrors, ScoreScratchTooSmallOrMisalignedIsAnError) {
  ADAMANT_REQUIRE_GPU();
  const AttentionShape shape{1, 128, 2, 64};
  const std::size_t all = flash_attention_scores_bytes(shape);
  ASSERT_EQ(all, std::size_t{2} * 3 * 8192);  // two heads of three 64 x 64 tiles on or below the diagonal
  const std::size_t needed = all / 2;         // one head at a time is the least
  auto qkv = bf16_on_gpu(random_bf16_values(128 * 3 * 2 * 64, 41, 1.0));
  auto out = poisoned_bf16(128 * 2 * 64), d_out = poisoned_bf16(128 * 2 * 64);
  auto logsumexp = poisoned_floats(2 * 128);
  auto d_qkv = poisoned_bf16(qkv.host.size());
  const std::vector<std::uint16_t> before = d_qkv.download();
  MirroredArray<std::uint16_t> scratch(needed / 2 + 8, DType::bf16);
  auto statistics = poisoned_floats(flash_attention_statistics_bytes(shape) / sizeof(float));
  const Stream stream(testing::gpu());
  auto expect_refused = [&](const Tensor& given, const std::string& bytes, const char* what) {
    try {
      flash_attention_backward(d_out.device_view(), qkv.device_view(), out.device_view(), logsumexp.device_view(),
                               d_qkv.device_view(), shape, {}, stream, statistics.device_view(), given);
      FAIL() << what << " was accepted";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("score scratch of " + bytes + " bytes"), std::string::npos) << message;
      EXPECT_NE(message.find("needs at least " + std::to_string(needed) + " bytes (one sample and head; " +
                             std::to_string(all) + " for all at once), 16-byte aligned"),
                std::string::npos)
          << message;
    }
    stream.synchronize();
    testing::expect_bitwise_equal(d_qkv.download(), before, std::string("d_qkv after ") + what);
  };
  const Tensor whole = scratch.device_view();
  expect_refused(Tensor(whole.data, DType::u8, whole.device, {static_cast<std::int64_t>(needed - 16)}),
                 std::to_string(needed - 16), "a scratch 16 bytes short");
  expect_refused(
      Tensor(static_cast<char*>(whole.data) + 2, DType::u8, whole.device, {static_cast<std::int64_t>(needed)}),
      std::to_string(needed), "a scratch 2 bytes off alignment");

  WorkspaceNeeds short_needs;
  short_needs.attention_statistics_bytes = flash_attention_statistics_bytes(shape);
  short_needs.attention_scores_bytes = needed - 16;
  const Workspace workspace(stream, short_needs);
  try {
    flash_attention_backward(d_out.device_view(), qkv.device_view(), out.device_view(), logsumexp.device_view(),
                             d_qkv.device_view(), shape, {}, workspace, stream);
    FAIL() << "a workspace with a short score scratch was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("needs at least " + std::to_string(needed) + " bytes"), std::string::npos)
        << error.what();
  }
}

// The GPU's backward needs a statistics scratch: none, one 16 bytes short, one off alignment, one
// that overlaps d_qkv and a workspace made without one are refused before anything runs, with
// what it needs; d_qkv keeps its contents.
TEST(CudaFlashAttentionErrors, StatisticsScratchMissingShortMisalignedOrOverlappingIsAnError) {
  ADAMANT_REQUIRE_GPU();
  const AttentionShape shape{1, 128, 2, 64};
  const std::size_t needed = flash_attention_statistics_bytes(shape);
  ASSERT_EQ(needed, std::size_t{128} * 2 * 16);  // 16 bytes a (position, head)
  auto qkv = bf16_on_gpu(random_bf16_values(128 * 3 * 2 * 64, 43, 1.0));
  auto out = poisoned_bf16(128 * 2 * 64), d_out = poisoned_bf16(128 * 2 * 64);
  auto logsumexp = poisoned_floats(2 * 128);
  auto d_qkv = poisoned_bf16(qkv.host.size());
  const std::vector<std::uint16_t> before = d_qkv.download();
  auto statistics = poisoned_floats(needed / sizeof(float) + 4);
  const Stream stream(testing::gpu());
  auto expect_refused = [&](const Tensor& given, const std::string& expected, const char* what) {
    try {
      flash_attention_backward(d_out.device_view(), qkv.device_view(), out.device_view(), logsumexp.device_view(),
                               d_qkv.device_view(), shape, {}, stream, given);
      FAIL() << what << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << what << ": " << error.what();
    }
    stream.synchronize();
    testing::expect_bitwise_equal(d_qkv.download(), before, std::string("d_qkv after ") + what);
  };
  const std::string needs =
      "needs " + std::to_string(needed) + " bytes (flash_attention_statistics_bytes), 16-byte aligned";
  const Tensor whole = statistics.device_view();
  expect_refused(Tensor{}, needs, "no statistics scratch");
  expect_refused(Tensor(whole.data, DType::u8, whole.device, {static_cast<std::int64_t>(needed - 16)}),
                 "statistics scratch of " + std::to_string(needed - 16) + " bytes", "a scratch 16 bytes short");
  expect_refused(
      Tensor(static_cast<char*>(whole.data) + 4, DType::u8, whole.device, {static_cast<std::int64_t>(needed)}), needs,
      "a scratch 4 bytes off alignment");
  const Tensor d_qkv_view = d_qkv.device_view();
  expect_refused(Tensor(d_qkv_view.data, DType::u8, d_qkv_view.device, {static_cast<std::int64_t>(needed)}),
                 "the statistics scratch overlaps an operand", "a scratch inside d_qkv");

  const Workspace workspace(stream, WorkspaceNeeds{});
  try {
    flash_attention_backward(d_out.device_view(), qkv.device_view(), out.device_view(), logsumexp.device_view(),
                             d_qkv.device_view(), shape, {}, workspace, stream);
    FAIL() << "a workspace without a statistics scratch was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("WorkspaceNeeds::attention_statistics_bytes"), std::string::npos)
        << error.what();
  }
  stream.synchronize();
  testing::expect_bitwise_equal(d_qkv.download(), before, "d_qkv after a workspace without statistics");
}

}  // namespace
}  // namespace adamant::kernels
