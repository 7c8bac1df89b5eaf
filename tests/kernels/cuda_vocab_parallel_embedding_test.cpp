// The CUDA embeddings over vocabulary-parallel slices of the word table (and without
// a position table) against the CPU reference kernels, slice by slice. The CPU kernels
// are checked against the definition, and their slices against the whole table, in
// tests/kernels/embedding_test.cpp.
//
// Tolerances as in cuda_pointwise_test.cpp: the forward output and d_position are the
// same fp32 operations in the same order on both sides (bit for bit after the bf16
// rounding of the GPU output); d_word is an fp32 sum in another order, compared with
// 1e-5 * (the sum of the absolute values of its terms).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels {
namespace {

using testing::MirroredArray;

using testing::bf16_on_gpu;
using testing::f32_on_gpu;
using testing::rounded_normal;
using testing::to_bf16_bits;

Tensor host_tensor(std::vector<float>& values) {
  return Tensor::flat(values.data(), DType::f32, Device::cpu(), values.size());
}

// Tokens over the whole vocabulary with repeats, and every slice's first and last rows.
std::vector<std::int32_t> tokens_across(std::size_t n, const std::vector<std::int64_t>& starts, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> any(0, starts.back() - 1);
  std::vector<std::int32_t> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = static_cast<std::int32_t>(i % 5 == 0 ? 7 : any(rng));
  for (std::size_t s = 0; s + 1 < starts.size() && 2 * s + 1 < n; ++s) {
    tokens[2 * s] = static_cast<std::int32_t>(starts[s]);
    tokens[2 * s + 1] = static_cast<std::int32_t>(starts[s + 1] - 1);
  }
  return tokens;
}

struct SlicedEmbeddingCase {
  std::int64_t batch, seq, channels;  // channels % 8 != 0 takes the scalar path
  std::vector<std::int64_t> starts;   // slice s: rows [starts[s], starts[s + 1]) of the table
};

std::string describe(const SlicedEmbeddingCase& c) {
  std::string slices;
  for (const std::int64_t start : c.starts) {
    slices += ' ';
    slices += std::to_string(start);
  }
  return "batch " + std::to_string(c.batch) + " seq " + std::to_string(c.seq) + " channels " +
         std::to_string(c.channels) + " slices at" + slices;
}

const std::vector<SlicedEmbeddingCase> kSlicedCases = {
    {3, 100, 264, {0, 2050, 4099}},        // T = 2, uneven
    {3, 100, 264, {0, 1366, 2732, 4099}},  // T = 3: slices that do not start on a 32-row tile
    {2, 64, 100, {0, 1000, 2000, 3000}},   // T = 3, scalar path
    {4, 128, 768, {0, 25152, 50304}},      // GPT vocabulary, T = 2
};

// Slice 0 adds the position embedding and its gradient; the others pass empty tensors.
TEST(CudaVocabParallelEmbedding, ForwardSlicesMatchTheCpuBitForBit) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const SlicedEmbeddingCase& c : kSlicedCases) {
    SCOPED_TRACE(describe(c));
    const auto rows = static_cast<std::size_t>(c.batch * c.seq);
    const auto channels = static_cast<std::size_t>(c.channels);
    const std::vector<float> word = rounded_normal(static_cast<std::size_t>(c.starts.back()) * channels, 91, 0.0, 0.05);
    std::vector<float> position = rounded_normal(static_cast<std::size_t>(c.seq) * channels, 92, 0.0, 0.02);
    MirroredArray<std::int32_t> tokens(rows, DType::i32);
    tokens.host = tokens_across(rows, c.starts, 93);
    tokens.upload();
    auto position_gpu = bf16_on_gpu(position);
    for (std::size_t s = 0; s + 1 < c.starts.size(); ++s) {
      SCOPED_TRACE("slice " + std::to_string(s));
      const EmbeddingShape shape{c.batch, c.seq, c.channels, c.starts[s + 1] - c.starts[s], c.starts[s]};
      std::vector<float> slice(word.begin() + c.starts[s] * c.channels, word.begin() + c.starts[s + 1] * c.channels);
      std::vector<float> out(rows * channels);
      cpu::embedding_forward(tokens.host_view(), host_tensor(slice), s == 0 ? host_tensor(position) : Tensor{},
                             host_tensor(out), shape);

      auto slice_gpu = bf16_on_gpu(slice);
      MirroredArray<std::uint16_t> out_gpu(out.size(), DType::bf16);
      embedding_forward(tokens.device_view(), slice_gpu.device_view(), s == 0 ? position_gpu.device_view() : Tensor{},
                        out_gpu.device_view(), shape, stream);
      stream.synchronize();
      testing::expect_bitwise_equal(out_gpu.download(), to_bf16_bits(out), "embedding out of the slice");
    }
  }
}

TEST(CudaVocabParallelEmbedding, BackwardSlicesMatchTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const SlicedEmbeddingCase& c : kSlicedCases) {
    SCOPED_TRACE(describe(c));
    const auto rows = static_cast<std::size_t>(c.batch * c.seq);
    const auto channels = static_cast<std::size_t>(c.channels);
    std::vector<float> d_out = rounded_normal(rows * channels, 94, 0.0, 1.0);
    MirroredArray<std::int32_t> tokens(rows, DType::i32);
    tokens.host = tokens_across(rows, c.starts, 95);
    tokens.upload();
    const std::vector<float> d_word_initial =
        rounded_normal(static_cast<std::size_t>(c.starts.back()) * channels, 96, 0.0, 0.01);
    const std::vector<float> d_position_initial =
        rounded_normal(static_cast<std::size_t>(c.seq) * channels, 97, 0.0, 0.01);
    auto d_out_gpu = bf16_on_gpu(d_out);
    for (std::size_t s = 0; s + 1 < c.starts.size(); ++s) {
      SCOPED_TRACE("slice " + std::to_string(s));
      const EmbeddingShape shape{c.batch, c.seq, c.channels, c.starts[s + 1] - c.starts[s], c.starts[s]};
      const std::vector<float> d_word_start(d_word_initial.begin() + c.starts[s] * c.channels,
                                            d_word_initial.begin() + c.starts[s + 1] * c.channels);
      std::vector<float> d_word = d_word_start, d_position = d_position_initial;
      cpu::embedding_backward(host_tensor(d_out), tokens.host_view(), host_tensor(d_word),
                              s == 0 ? host_tensor(d_position) : Tensor{}, shape);
      std::vector<double> word_terms(d_word.size());
      for (std::size_t i = 0; i < d_word.size(); ++i) word_terms[i] = std::abs(d_word_start[i]);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::int64_t row = tokens.host[r] - c.starts[s];
        if (row < 0 || row >= shape.vocab) continue;
        for (std::size_t k = 0; k < channels; ++k) {
          word_terms[static_cast<std::size_t>(row) * channels + k] += std::abs(d_out[r * channels + k]);
        }
      }

      auto d_word_gpu = f32_on_gpu(d_word_start);
      auto d_position_gpu = f32_on_gpu(d_position_initial);
      MirroredArray<float> scratch(
          static_cast<std::size_t>(embedding_backward_scratch_floats(testing::gpu(), c.batch * c.seq, c.channels)),
          DType::f32);
      embedding_backward(d_out_gpu.device_view(), tokens.device_view(), d_word_gpu.device_view(),
                         s == 0 ? d_position_gpu.device_view() : Tensor{}, scratch.device_view(), shape, stream);
      stream.synchronize();
      const std::vector<float> gpu_d_word = d_word_gpu.download();
      std::size_t mismatches = 0, first = 0;
      for (std::size_t i = 0; i < gpu_d_word.size(); ++i) {
        const double error = std::abs(static_cast<double>(gpu_d_word[i]) - d_word[i]);
        if (!(error <= 1e-5 * word_terms[i]) && mismatches++ == 0) first = i;
      }
      EXPECT_EQ(mismatches, 0u) << "d_word of the slice: " << mismatches << " elements outside 1e-5 of their terms; "
                                << "first at " << first << " (gpu " << gpu_d_word[first] << ", cpu " << d_word[first]
                                << ")";
      // Slice 0 sums d_position in the CPU kernel's order; the others leave it alone.
      testing::expect_bitwise_equal(d_position_gpu.download(), d_position, "d_position");
    }
  }
}

}  // namespace
}  // namespace adamant::kernels
