// CUDA word and position embeddings, forward and backward, against the CPU reference
// kernels (kernels/cpu/), on token ids with heavy repeats. The forward gathers bf16 rows
// and must agree bit for bit; the word gradient sums rows in fp32 in another order, so it
// is compared with 1e-5 * (the sum of its terms' magnitudes), and the position gradient,
// summed in the CPU's order, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "kernels/cuda_test_util.h"
#include "kernels/model_kernels_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::bf16_on_gpu;
using testing::download_bf16;
using testing::expect_near_all;
using testing::f32_on_gpu;
using testing::MirroredArray;
using testing::rounded_normal;
using testing::to_bf16_bits;
using testing::view;

// Uniform values in [-scale, scale) rounded to bf16, from a counter hash: cheap
// enough for whole embedding tables (tens of millions of elements).
std::vector<float> rounded_uniform(std::size_t n, std::uint64_t seed, float scale) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + i;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) * 0x1p-24f;  // [0, 1)
    values[i] = bf16_to_f32(f32_to_bf16(scale * (2.0f * unit - 1.0f)));
  }
  return values;
}

struct EmbeddingCase {
  EmbeddingShape shape;
  std::int64_t position_rows;  // the position table may be longer than seq
};

std::string name_of(const EmbeddingShape& s) {
  return "batch " + std::to_string(s.batch) + " seq " + std::to_string(s.seq) + " channels " +
         std::to_string(s.channels) + " vocab " + std::to_string(s.vocab);
}

// Token ids with heavy repeats: a third one end-of-text id, a fifth from a few ids
// that share one 32-row tile, the rest uniform.
std::vector<std::int32_t> repetitive_tokens(std::size_t n, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> any(0, vocab - 1);
  std::uniform_int_distribution<int> kind(0, 14);
  std::uniform_int_distribution<std::int64_t> few(0, std::min<std::int64_t>(vocab, 40) - 1);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) {
    const int k = kind(rng);
    t = static_cast<std::int32_t>(k < 5 ? vocab - 1 : (k < 8 ? few(rng) : any(rng)));
  }
  return tokens;
}

// repetitive_tokens on the GPU (and kept on the host for the CPU kernels).
MirroredArray<std::int32_t> repetitive_tokens_on_gpu(std::size_t n, std::int64_t vocab, std::uint64_t seed) {
  return testing::on_gpu(repetitive_tokens(n, vocab, seed), DType::i32);
}

const std::vector<EmbeddingCase> kEmbeddingCases = {
    {{4, 512, 768, 50304}, 2048}, {{3, 37, 100, 1000}, 37}, {{2, 256, 2048, 4099}, 300}, {{1, 1, 8, 5}, 4}};

TEST(CudaEmbedding, ForwardMatchesCpuBitForBit) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const EmbeddingCase& c : kEmbeddingCases) {
    const EmbeddingShape& s = c.shape;
    SCOPED_TRACE(name_of(s));
    const auto rows = static_cast<std::size_t>(s.batch * s.seq);
    std::vector<float> word = rounded_uniform(static_cast<std::size_t>(s.vocab * s.channels), 61, 0.05f);
    std::vector<float> position = rounded_normal(static_cast<std::size_t>(c.position_rows * s.channels), 62, 0.0, 0.02);
    auto tokens = repetitive_tokens_on_gpu(rows, s.vocab, 63);
    std::vector<float> out(rows * static_cast<std::size_t>(s.channels));
    cpu::embedding_forward(tokens.host_view(), view(word), view(position), view(out), s);

    auto word_gpu = bf16_on_gpu(word);
    auto position_gpu = bf16_on_gpu(position);
    MirroredArray<std::uint16_t> out_gpu(out.size(), DType::bf16);
    embedding_forward(tokens.device_view(), word_gpu.device_view(), position_gpu.device_view(), out_gpu.device_view(),
                      s, stream);
    stream.synchronize();
    testing::expect_bitwise_equal(out_gpu.download(), to_bf16_bits(out), "embedding out");
  }
}

// A backward's operands and the CPU's results: d_out, tokens with heavy repeats, the gradients'
// old values (bf16 values of about `initial_scale`), the CPU kernel's fp32 gradients, and for
// each word-gradient element the sum of its terms' magnitudes (its summation error's bound).
struct BackwardReference {
  MirroredArray<std::int32_t> tokens;
  std::vector<float> d_out{}, d_word_initial{}, d_position_initial{}, d_word{}, d_position{}, word_terms{};
};

BackwardReference backward_reference(const EmbeddingCase& c, std::uint64_t seed, float initial_scale) {
  const EmbeddingShape& s = c.shape;
  const auto rows = static_cast<std::size_t>(s.batch * s.seq);
  const auto channels = static_cast<std::size_t>(s.channels);
  BackwardReference r{repetitive_tokens_on_gpu(rows, s.vocab, seed + 1)};
  r.d_out = rounded_normal(rows * channels, seed, 0.0, 1.0);
  r.d_word_initial = rounded_uniform(static_cast<std::size_t>(s.vocab * s.channels), seed + 2, initial_scale);
  r.d_position_initial =
      rounded_normal(static_cast<std::size_t>(c.position_rows) * channels, seed + 3, 0.0, initial_scale);
  r.d_word = r.d_word_initial;
  r.d_position = r.d_position_initial;
  cpu::embedding_backward(view(r.d_out), r.tokens.host_view(), view(r.d_word), view(r.d_position), s);
  r.word_terms.resize(r.d_word.size());
  for (std::size_t i = 0; i < r.d_word.size(); ++i) r.word_terms[i] = std::abs(r.d_word_initial[i]);
  for (std::size_t row = 0; row < rows; ++row) {
    const auto token = static_cast<std::size_t>(r.tokens.host[row]);
    for (std::size_t k = 0; k < channels; ++k) {
      r.word_terms[token * channels + k] += std::abs(r.d_out[row * channels + k]);
    }
  }
  return r;
}

TEST(CudaEmbedding, BackwardMatchesCpuAndIsDeterministic) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const EmbeddingCase& c : kEmbeddingCases) {
    const EmbeddingShape& s = c.shape;
    SCOPED_TRACE(name_of(s));
    BackwardReference ref = backward_reference(c, 71, 0.01f);
    const std::vector<float>&d_out = ref.d_out, &d_word_initial = ref.d_word_initial,
          &d_position_initial = ref.d_position_initial, &d_word = ref.d_word, &d_position = ref.d_position,
          &word_terms = ref.word_terms;
    auto& tokens = ref.tokens;

    auto d_out_gpu = bf16_on_gpu(d_out);
    auto d_word_gpu = f32_on_gpu(d_word_initial);
    auto d_position_gpu = f32_on_gpu(d_position_initial);
    MirroredArray<float> scratch(
        static_cast<std::size_t>(embedding_backward_scratch_floats(testing::gpu(), s.batch * s.seq, s.channels)),
        DType::f32);
    auto run = [&] {
      embedding_backward(d_out_gpu.device_view(), tokens.device_view(), d_word_gpu.device_view(),
                         d_position_gpu.device_view(), scratch.device_view(), s, stream);
      stream.synchronize();
    };
    run();
    const std::vector<float> d_word_first = d_word_gpu.download();
    const std::vector<float> d_position_first = d_position_gpu.download();
    expect_near_all(
        d_word_first, d_word, [&](std::size_t i) { return 1e-5 * word_terms[i]; }, "d_word");
    // d_position sums in the CPU kernel's order: the same bits.
    testing::expect_bitwise_equal(d_position_first, d_position, "d_position");

    d_word_gpu.upload();  // host still holds the initial values
    d_position_gpu.upload();
    run();
    testing::expect_bitwise_equal(d_word_gpu.download(), d_word_first, "d_word run to run");
    testing::expect_bitwise_equal(d_position_gpu.download(), d_position_first, "d_position run to run");
  }
}

// Into a bf16 gradient buffer (GptConfig::grad_buffer): each row's fp32 sum, started from the
// buffer's value, is rounded once. The position gradient sums in the CPU's order, so it is the
// CPU's fp32 result rounded to bf16, bit for bit; the word gradient is within the fp32 bound
// above plus bf16's unit roundoff (2^-8) of the result.
TEST(CudaEmbedding, BackwardIntoBf16GradientsRoundsEachSumOnce) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  for (const EmbeddingCase& c : kEmbeddingCases) {
    const EmbeddingShape& s = c.shape;
    SCOPED_TRACE(name_of(s));
    const auto rows = static_cast<std::size_t>(s.batch * s.seq);
    const auto channels = static_cast<std::size_t>(s.channels);
    BackwardReference ref = backward_reference(c, 171, 0.5f);
    const std::vector<float>&d_word_initial = ref.d_word_initial, &d_word = ref.d_word, &word_terms = ref.word_terms;
    auto& tokens = ref.tokens;

    auto d_out_gpu = bf16_on_gpu(ref.d_out);
    auto d_word_gpu = bf16_on_gpu(d_word_initial);
    auto d_position_gpu = bf16_on_gpu(ref.d_position_initial);
    MirroredArray<float> scratch(
        static_cast<std::size_t>(embedding_backward_scratch_floats(testing::gpu(), s.batch * s.seq, s.channels)),
        DType::f32);
    embedding_backward(d_out_gpu.device_view(), tokens.device_view(), d_word_gpu.device_view(),
                       d_position_gpu.device_view(), scratch.device_view(), s, stream);
    stream.synchronize();
    expect_near_all(
        download_bf16(d_word_gpu), d_word,
        [&](std::size_t i) { return 1e-5 * word_terms[i] + std::ldexp(std::abs(d_word[i]), -8); }, "bf16 d_word");
    testing::expect_bitwise_equal(d_position_gpu.download(), to_bf16_bits(ref.d_position), "bf16 d_position");
    // A row no token touches keeps its bits.
    const std::vector<std::uint16_t> word_bits = d_word_gpu.download();
    const std::vector<std::uint16_t> initial_bits = to_bf16_bits(d_word_initial);
    std::vector<bool> touched(static_cast<std::size_t>(s.vocab), false);
    for (std::size_t r = 0; r < rows; ++r) touched[static_cast<std::size_t>(tokens.host[r])] = true;
    for (std::size_t row = 0; row < touched.size(); ++row) {
      if (touched[row]) continue;
      for (std::size_t k = 0; k < channels; ++k) {
        ASSERT_EQ(word_bits[row * channels + k], initial_bits[row * channels + k]) << "untouched row " << row;
      }
    }
  }
}

// A token beyond the table belongs to another rank's slice: a zero word row. A negative one is invalid: NaN.
TEST(CudaEmbedding, TokenOutsideTheTableGivesZeroWordRowAndNegativeGivesNaN) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  const EmbeddingShape s{1, 3, 16, 10};
  std::vector<float> word = rounded_normal(160, 81, 0.0, 1.0);
  std::vector<float> position = rounded_normal(48, 82, 0.0, 1.0);
  MirroredArray<std::int32_t> tokens(3, DType::i32);
  tokens.host = {4, 10, -1};
  tokens.upload();
  auto word_gpu = bf16_on_gpu(word);
  auto position_gpu = bf16_on_gpu(position);
  MirroredArray<std::uint16_t> out_gpu(48, DType::bf16);
  embedding_forward(tokens.device_view(), word_gpu.device_view(), position_gpu.device_view(), out_gpu.device_view(), s,
                    stream);
  auto d_out_gpu = bf16_on_gpu(std::vector<float>(48, 1.0f));
  auto d_word_gpu = f32_on_gpu(std::vector<float>(160, 0.0f));
  auto d_position_gpu = f32_on_gpu(std::vector<float>(48, 0.0f));
  MirroredArray<float> scratch(static_cast<std::size_t>(embedding_backward_scratch_floats(testing::gpu(), 3, 16)),
                               DType::f32);
  embedding_backward(d_out_gpu.device_view(), tokens.device_view(), d_word_gpu.device_view(),
                     d_position_gpu.device_view(), scratch.device_view(), s, stream);
  stream.synchronize();
  const std::vector<float> out = download_bf16(out_gpu);
  const std::vector<float> d_word = d_word_gpu.download();
  for (std::size_t k = 0; k < 16; ++k) {
    EXPECT_EQ(out[k], bf16_to_f32(f32_to_bf16(word[4 * 16 + k] + position[k]))) << "valid row, channel " << k;
    EXPECT_EQ(out[16 + k], position[16 + k]) << "token 10 = vocab, channel " << k;
    EXPECT_TRUE(std::isnan(out[32 + k])) << "token -1, channel " << k;
  }
  for (std::size_t i = 0; i < d_word.size(); ++i) {
    EXPECT_EQ(d_word[i], i / 16 == 4 ? 1.0f : 0.0f) << "d_word[" << i << "]";
  }
}

// The word gradient sorts in the caller's scratch: one that is too small is refused.
TEST(CudaEmbedding, BackwardRefusesATooSmallScratch) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(testing::gpu());
  const EmbeddingShape s{2, 64, 16, 10};
  MirroredArray<std::int32_t> tokens(128, DType::i32);
  tokens.host.assign(128, 3);
  tokens.upload();
  auto d_out_gpu = bf16_on_gpu(std::vector<float>(128 * 16, 1.0f));
  auto d_word_gpu = f32_on_gpu(std::vector<float>(160, 0.0f));
  const auto needed = static_cast<std::size_t>(embedding_backward_scratch_floats(testing::gpu(), 128, 16));
  MirroredArray<float> scratch(needed - 1, DType::f32);
  EXPECT_THROW(embedding_backward(d_out_gpu.device_view(), tokens.device_view(), d_word_gpu.device_view(), Tensor{},
                                  scratch.device_view(), s, stream),
               Error);
}

}  // namespace
}  // namespace adamant::kernels
