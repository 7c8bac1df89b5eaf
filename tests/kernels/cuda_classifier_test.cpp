// CUDA softmax cross-entropy, fused classifier and vocabulary-parallel classifier against
// the CPU reference kernels.
//
// Cross-entropy runs in fp32 on both sides: they differ only in the order of the row
// sum and in the exp implementation (a few fp32 ulps each), so losses must agree to
// 2e-5 (1 + |loss|) and gradients to 3e-5 |cpu| + 1e-9 |grad_scale| (1e-6 |grad_scale| at
// the target, where p - 1 cancels).
//
// The fused classifier takes bf16 x and embedding (rounded on the host; the CPU runs
// fp32 on the same values). Its logits differ only by fp32 summation order, so the
// losses must agree to 1e-4 (1 + |loss|). The gradient GEMMs read g rounded to bf16
// (2^-9 relative per term), so d_x and d_embedding may differ by 2^-8 of the
// magnitude |g| |embedding| (resp. |g|^T |x| + |old d_embedding|), plus 2^-8 |d_x|
// for d_x's own bf16 rounding. A wrong chunk offset, transpose or accumulation gives
// differences of the order of the magnitude itself.
//
// With bf16 logits (the scratch in bf16: model.classifier_logits_dtype) the inputs are
// small multiples of powers of two whose dot products have at most 8 significant bits,
// so the logits GEMM's result is exact in bf16 and the fp32 CPU reference computes the
// same logits: the tolerances above hold unchanged, and any wrong pitch, offset or
// unpacking of the bf16 rows shows as differences of the magnitude itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "kernels/cuda_linear_test_util.h"
#include "kernels/cuda_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::bf16_on_gpu;
using testing::bf16_values;
using testing::expect_close;
using testing::MirroredArray;
using testing::random_values;

// Values in {-levels, ..., levels} x step: with x of step 1/2 (levels 1) and an embedding
// of step 1/8 (levels 2), dot products over up to 64 channels are multiples of 1/16 of at
// most 8 in size: 7 bits, exact in bf16.
std::vector<float> exact_values(std::size_t n, std::mt19937_64& rng, float step, int levels) {
  std::uniform_int_distribution<int> pick(-levels, levels);
  std::vector<float> values(n);
  for (float& v : values) v = step * static_cast<float>(pick(rng));
  return values;
}

std::vector<std::int32_t> random_targets(std::size_t n, std::int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::int32_t> targets(n);
  for (auto& t : targets) t = pick(rng);
  if (n > 1) {
    targets[0] = 0;  // the ends of the row, where vector and scalar tails meet
    targets[n - 1] = static_cast<std::int32_t>(vocab - 1);
  }
  return targets;
}

std::vector<float> absolute(std::vector<float> values) {
  for (float& v : values) v = std::abs(v);
  return values;
}

Tensor host_view(std::vector<float>& v) { return Tensor::flat(v.data(), DType::f32, Device::cpu(), v.size()); }
Tensor host_view(std::vector<std::int32_t>& v) { return Tensor::flat(v.data(), DType::i32, Device::cpu(), v.size()); }

std::vector<double> scaled(const std::vector<float>& values, double factor, double offset = 0.0) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = factor * std::abs(values[i]) + offset;
  return out;
}

template <typename T>
MirroredArray<T> on_gpu(const std::vector<T>& values, DType dtype, std::size_t offset = 0) {
  MirroredArray<T> array(values.size(), dtype, offset);
  array.host = values;
  array.upload();
  return array;
}

struct CrossEntropyCase {
  std::int64_t rows, vocab;
  bool with_grad;
  double grad_scale;
  std::size_t offset;  // 1: logits not 16-byte aligned (scalar path)
};

// With bf16 logits the CPU reference runs in fp32 on the same (rounded) values, so the
// losses agree as in fp32; the gradient is rounded to bf16 in place (half an ulp: up to
// 2^-8 relative), on top of the fp32 tolerance.
void check_cross_entropy(const CrossEntropyCase& c, std::uint64_t seed, DType logits_dtype = DType::f32) {
  const bool bf16 = logits_dtype == DType::bf16;
  std::mt19937_64 rng(seed);
  auto logits = random_values(c.rows * c.vocab, rng, 3.0f, bf16);
  if (!logits.empty()) logits[logits.size() / 2] = 40.0f;  // one dominant logit
  auto targets = random_targets(c.rows, c.vocab, rng);
  auto expected = logits;
  std::vector<float> expected_losses(c.rows);
  cpu::softmax_cross_entropy(host_view(expected), host_view(targets), host_view(expected_losses), c.rows, c.vocab,
                             c.with_grad, c.grad_scale);

  std::vector<std::uint16_t> bits(bf16 ? logits.size() : 0);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(logits[i]);
  auto logits_f32 = on_gpu(bf16 ? std::vector<float>{0.0f} : logits, DType::f32, c.offset);
  auto logits_bf16 = on_gpu(bf16 ? bits : std::vector<std::uint16_t>{0}, DType::bf16, c.offset);
  const Tensor logits_view = bf16 ? logits_bf16.device_view() : logits_f32.device_view();
  auto targets_gpu = on_gpu(targets, DType::i32);
  auto losses_gpu = on_gpu(std::vector<float>(c.rows, std::nanf("")), DType::f32);
  Stream stream(testing::gpu());
  cuda::softmax_cross_entropy(logits_view, targets_gpu.device_view(), losses_gpu.device_view(), c.rows, c.vocab,
                              c.with_grad, c.grad_scale, stream);
  stream.synchronize();
  const std::string what = std::string(dtype_name(logits_dtype)) + " logits, " + std::to_string(c.rows) + " rows of " +
                           std::to_string(c.vocab) + (c.with_grad ? " with grad" : "") + " scale " +
                           std::to_string(c.grad_scale) + " offset " + std::to_string(c.offset);
  expect_close(losses_gpu.download(), expected_losses, 2e-5, scaled(expected_losses, 2e-5, 2e-5),
               "cross-entropy losses, " + what);
  // Without grad the GPU leaves the logits as they were (bitwise; the contract leaves them
  // unspecified, and the CPU uses them as scratch); with it they hold the gradient.
  if (!c.with_grad) expected = logits;
  // At the target, scale * (p - 1) cancels: there the absolute error of p (1e-6) counts.
  std::vector<double> gradient_tolerance(expected.size(), c.with_grad ? 1e-9 * std::abs(c.grad_scale) : 0.0);
  if (c.with_grad) {
    for (std::int64_t r = 0; r < c.rows; ++r)
      gradient_tolerance[r * c.vocab + targets[r]] = 1e-6 * std::abs(c.grad_scale);
  }
  // The CPU reference sums 50304 exponentials in fp32 in order (relative error ~sqrt(n) 2^-24, up to a
  // few 1e-5, seen 5.3e-5 on H200 against the GPU's tree sum), which scales a whole row of the gradient.
  const double relative = c.with_grad ? 2e-4 + (bf16 ? 1.0 / 256 : 0.0) : 0.0;
  expect_close(bf16 ? bf16_values(logits_bf16.download()) : logits_f32.download(), expected, relative,
               gradient_tolerance, "cross-entropy logits/gradient, " + what);
}

TEST(CudaCrossEntropy, MatchesTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<CrossEntropyCase> cases = {
      // GPT vocabulary, a typical 1/tokens scale: half rows of 100 KB, two blocks of 512
      // threads a multiprocessor (smaller rows take four blocks of 256)
      {8, 50304, true, 1.0 / 16384, 0},
      // More rows than multiprocessors: each cluster of the shared-memory form walks
      // several rows, copying the next while it writes this one's gradient.
      {300, 50304, true, 1.0 / 16384, 0},
      {3, 60000, true, 1.0, 0},  // a row too large for shared memory: read twice from global memory
      {9, 1004, true, 1.0, 0},   // an odd number of 4-wide groups: halves of 126 and 125
      {5, 4, true, 1.0, 0},      // one group: the second half of the row is empty
      {8, 50304, false, 1.0, 0},
      {5, 50304, true, 1.0, 1},  // unaligned rows: the scalar path
      {64, 1000, true, 0.5, 0},
      {7, 1001, true, 1.0, 0},  // odd vocabulary
      {3, 3, true, 2.0, 0},     // fewer columns than threads
      {1, 1, true, 1.0, 0},
  };
  std::uint64_t seed = 1;
  for (const auto& c : cases) check_cross_entropy(c, seed++);
}

TEST(CudaCrossEntropy, TargetOutsideTheVocabularyGivesNaN) {
  ADAMANT_REQUIRE_GPU();
  std::mt19937_64 rng(9);
  auto logits_gpu = on_gpu(random_values(2 * 100, rng, 1.0f, false), DType::f32);
  auto targets_gpu = on_gpu(std::vector<std::int32_t>{-1, 100}, DType::i32);
  auto losses_gpu = on_gpu(std::vector<float>(2, 0.0f), DType::f32);
  Stream stream(testing::gpu());
  cuda::softmax_cross_entropy(logits_gpu.device_view(), targets_gpu.device_view(), losses_gpu.device_view(), 2, 100,
                              false, 1.0, stream);
  stream.synchronize();
  const auto losses = losses_gpu.download();
  EXPECT_TRUE(std::isnan(losses[0]) && std::isnan(losses[1])) << losses[0] << " " << losses[1];
}

TEST(CudaCrossEntropy, Bf16LogitsMatchTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<CrossEntropyCase> cases = {
      {8, 50304, true, 1.0 / 16384, 0},    // a row staged in shared memory by a cluster of two blocks
      {300, 50304, true, 1.0 / 16384, 0},  // clusters walking several rows
      {20, 100000, true, 1.0, 0},          // half rows of 100 KB: two blocks of 512 threads a multiprocessor
      {3, 240000, true, 1.0, 0},           // a row too large for shared memory: read twice
      {9, 1000, true, 1.0, 0},             // 125 eight-wide groups: halves of 63 and 62
      {5, 8, true, 1.0, 0},                // one group: the second half of the row is empty
      {8, 50304, false, 1.0, 0},           // losses only
      {5, 50304, true, 1.0, 1},            // unaligned rows: the scalar path
      {7, 1004, true, 1.0, 0},             // a multiple of 4, not of 8: the scalar path
      {3, 3, true, 2.0, 0},
  };
  std::uint64_t seed = 101;
  for (const auto& c : cases) check_cross_entropy(c, seed++, DType::bf16);
}

struct ClassifierCase {
  ClassifierShape shape;
  std::int64_t chunk_rows;
  DType dtype;
  DType logits = DType::f32;  // the scratch's dtype
};

std::string describe(const ClassifierCase& c) {
  return std::to_string(c.shape.rows) + " rows, " + std::to_string(c.shape.channels) + " channels, vocab " +
         std::to_string(c.shape.vocab) + ", chunks of " + std::to_string(c.chunk_rows) + ", " +
         std::string(dtype_name(c.dtype)) + ", " + std::string(dtype_name(c.logits)) + " logits";
}

// The activation-dtype copy of host values on the GPU: bf16, or fp32 throughout.
class ActivationArray {
 public:
  ActivationArray(const std::vector<float>& values, DType dtype)
      : dtype_(dtype),
        bf16_(dtype == DType::bf16 ? bf16_on_gpu(values) : MirroredArray<std::uint16_t>(0, DType::bf16)),
        f32_(dtype == DType::f32 ? on_gpu(values, DType::f32) : MirroredArray<float>(0, DType::f32)) {}
  Tensor view() { return dtype_ == DType::bf16 ? bf16_.device_view() : f32_.device_view(); }
  std::vector<float> download() const {
    return dtype_ == DType::bf16 ? bf16_values(bf16_.download()) : f32_.download();
  }

 private:
  DType dtype_;
  MirroredArray<std::uint16_t> bf16_;
  MirroredArray<float> f32_;
};

// Runs the CPU reference and the GPU kernel three ways: without gradients, with
// gradients (d_embedding overwritten), and accumulating onto an existing d_embedding; with
// bf16 operands also both ways into a bf16 d_embedding.
void check_classifier(const ClassifierCase& c, std::uint64_t seed) {
  const auto& s = c.shape;
  const bool bf16 = c.dtype == DType::bf16;
  const bool exact = c.logits == DType::bf16;
  const double grad_scale = 1.0 / static_cast<double>(s.rows);
  std::mt19937_64 rng(seed);
  auto x =
      exact ? exact_values(s.rows * s.channels, rng, 0.5f, 1) : random_values(s.rows * s.channels, rng, 1.0f, bf16);
  auto embedding =
      exact ? exact_values(s.vocab * s.channels, rng, 0.125f, 2) : random_values(s.vocab * s.channels, rng, 0.2f, bf16);
  auto targets = random_targets(s.rows, s.vocab, rng);
  const auto old_d_embedding = random_values(s.vocab * s.channels, rng, 1e-3f, false);

  // CPU reference (fp32 on the rounded values).
  std::vector<float> scratch(c.chunk_rows * s.vocab), losses(s.rows), d_x(s.rows * s.channels);
  std::vector<float> d_embedding(s.vocab * s.channels);
  cpu::fused_classifier(host_view(x), host_view(embedding), host_view(targets), host_view(losses), host_view(scratch),
                        grad_scale, host_view(d_x), host_view(d_embedding), false, s);
  std::vector<float> accumulated = old_d_embedding, losses_again(s.rows), d_x_again(d_x.size());
  cpu::fused_classifier(host_view(x), host_view(embedding), host_view(targets), host_view(losses_again),
                        host_view(scratch), grad_scale, host_view(d_x_again), host_view(accumulated), true, s);

  // Magnitudes: |g| |embedding| and |g|^T |x|, with g from the CPU kernels.
  std::vector<float> g(s.rows * s.vocab), unused_losses(s.rows);
  cpu::gemm<float>(Transpose::no, Transpose::yes, s.rows, s.vocab, s.channels, 1.0f, x.data(), embedding.data(), 0.0f,
                   g.data());
  cpu::softmax_cross_entropy(host_view(g), host_view(targets), host_view(unused_losses), s.rows, s.vocab, true,
                             grad_scale);
  const auto abs_g = absolute(g), abs_x = absolute(x), abs_embedding = absolute(embedding);
  std::vector<float> d_x_magnitude(d_x.size()), d_embedding_magnitude(d_embedding.size());
  cpu::gemm<float>(Transpose::no, Transpose::no, s.rows, s.channels, s.vocab, 1.0f, abs_g.data(), abs_embedding.data(),
                   0.0f, d_x_magnitude.data());
  cpu::gemm<float>(Transpose::yes, Transpose::no, s.vocab, s.channels, s.rows, 1.0f, abs_g.data(), abs_x.data(), 0.0f,
                   d_embedding_magnitude.data());
  // bf16 g: 2^-9 per term, allowed 2^-8; fp32 g: only the order of the sums.
  const double gradient_factor = bf16 ? 1.0 / 256 : 1e-4;
  const double d_x_relative = bf16 ? 1.0 / 256 : 1e-6;

  auto to_gpu = [&](const std::vector<float>& values) {
    return bf16 ? bf16_on_gpu(values) : MirroredArray<std::uint16_t>(0, DType::bf16);
  };
  auto x_bf16 = to_gpu(x), embedding_bf16 = to_gpu(embedding);
  auto x_f32 = on_gpu(bf16 ? std::vector<float>{0.0f} : x, DType::f32);
  auto embedding_f32 = on_gpu(bf16 ? std::vector<float>{0.0f} : embedding, DType::f32);
  const Tensor x_view = bf16 ? x_bf16.device_view() : x_f32.device_view();
  const Tensor embedding_view = bf16 ? embedding_bf16.device_view() : embedding_f32.device_view();
  auto targets_gpu = on_gpu(targets, DType::i32);
  ActivationArray scratch_gpu(std::vector<float>(c.chunk_rows * s.vocab, 0.0f), c.logits);
  const std::vector<float> nan_rows(s.rows, std::nanf("")), nan_x(d_x.size(), std::nanf(""));
  auto losses_gpu = on_gpu(nan_rows, DType::f32);
  auto d_x_bf16 = to_gpu(nan_x);
  auto d_x_f32 = on_gpu(bf16 ? std::vector<float>{0.0f} : nan_x, DType::f32);
  const Tensor d_x_view = bf16 ? d_x_bf16.device_view() : d_x_f32.device_view();
  auto d_embedding_gpu = on_gpu(std::vector<float>(d_embedding.size(), std::nanf("")), DType::f32);
  auto download_d_x = [&] { return bf16 ? bf16_values(d_x_bf16.download()) : d_x_f32.download(); };
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const std::string what = describe(c);

  // 1. Losses only.
  cuda::fused_classifier(x_view, embedding_view, targets_gpu.device_view(), losses_gpu.device_view(),
                         scratch_gpu.view(), grad_scale, Tensor{}, Tensor{}, false, s, workspace, stream);
  stream.synchronize();
  expect_close(losses_gpu.download(), losses, 1e-4, scaled(losses, 0.0, 1e-4), "losses without grad, " + what);

  // 2. With gradients, d_embedding overwritten (it holds NaN before).
  losses_gpu.upload();
  cuda::fused_classifier(x_view, embedding_view, targets_gpu.device_view(), losses_gpu.device_view(),
                         scratch_gpu.view(), grad_scale, d_x_view, d_embedding_gpu.device_view(), false, s, workspace,
                         stream);
  stream.synchronize();
  expect_close(losses_gpu.download(), losses, 1e-4, scaled(losses, 0.0, 1e-4), "losses with grad, " + what);
  expect_close(download_d_x(), d_x, d_x_relative, scaled(d_x_magnitude, gradient_factor), "d_x, " + what);
  expect_close(d_embedding_gpu.download(), d_embedding, 1e-6, scaled(d_embedding_magnitude, gradient_factor),
               "d_embedding, " + what);

  // 3. Accumulating onto an existing d_embedding.
  d_embedding_gpu.host = old_d_embedding;
  d_embedding_gpu.upload();
  cuda::fused_classifier(x_view, embedding_view, targets_gpu.device_view(), losses_gpu.device_view(),
                         scratch_gpu.view(), grad_scale, d_x_view, d_embedding_gpu.device_view(), true, s, workspace,
                         stream);
  stream.synchronize();
  std::vector<double> accumulate_tolerance = scaled(d_embedding_magnitude, gradient_factor);
  for (std::size_t i = 0; i < accumulate_tolerance.size(); ++i) {
    accumulate_tolerance[i] += 1e-6 * std::abs(old_d_embedding[i]);
  }
  expect_close(d_embedding_gpu.download(), accumulated, 1e-6, accumulate_tolerance, "d_embedding accumulated, " + what);
  expect_close(download_d_x(), d_x_again, d_x_relative, scaled(d_x_magnitude, gradient_factor),
               "d_x (accumulating run), " + what);
  if (!bf16) return;

  // 4. Into a bf16 gradient buffer (GptConfig::grad_buffer), written and then added to: each
  // chunk's product is added with one rounding, bf16's unit roundoff (2^-8) of the sum at most.
  const std::int64_t chunks = (s.rows + c.chunk_rows - 1) / c.chunk_rows;
  const double rounding = static_cast<double>(chunks) * 0x1p-8;
  auto d_embedding_bf16 = bf16_on_gpu(std::vector<float>(d_embedding.size(), std::nanf("")));
  cuda::fused_classifier(x_view, embedding_view, targets_gpu.device_view(), losses_gpu.device_view(),
                         scratch_gpu.view(), grad_scale, d_x_view, d_embedding_bf16.device_view(), false, s, workspace,
                         stream);
  stream.synchronize();
  std::vector<double> written_tolerance = scaled(d_embedding_magnitude, gradient_factor);
  for (std::size_t i = 0; i < written_tolerance.size(); ++i)
    written_tolerance[i] += rounding * d_embedding_magnitude[i];
  expect_close(bf16_values(d_embedding_bf16.download()), d_embedding, 0.0, written_tolerance,
               "bf16 d_embedding, " + what);

  std::vector<float> old_bf16(old_d_embedding.size()), accumulated_bf16(accumulated.size());
  for (std::size_t i = 0; i < old_bf16.size(); ++i) {
    old_bf16[i] = bf16_to_f32(f32_to_bf16(old_d_embedding[i]));
    accumulated_bf16[i] = static_cast<float>(static_cast<double>(accumulated[i]) - old_d_embedding[i] + old_bf16[i]);
  }
  d_embedding_bf16 = bf16_on_gpu(old_bf16);
  cuda::fused_classifier(x_view, embedding_view, targets_gpu.device_view(), losses_gpu.device_view(),
                         scratch_gpu.view(), grad_scale, d_x_view, d_embedding_bf16.device_view(), true, s, workspace,
                         stream);
  stream.synchronize();
  for (std::size_t i = 0; i < accumulate_tolerance.size(); ++i) {
    accumulate_tolerance[i] += (rounding + 0x1p-8) * (d_embedding_magnitude[i] + std::abs(old_bf16[i]));
  }
  expect_close(bf16_values(d_embedding_bf16.download()), accumulated_bf16, 0.0, accumulate_tolerance,
               "bf16 d_embedding accumulated, " + what);
}

TEST(CudaFusedClassifier, MatchesTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<ClassifierCase> cases = {
      {{100, 64, 50304}, 32, DType::bf16},   // GPT vocabulary, last chunk of 4 rows
      {{300, 32, 50304}, 300, DType::bf16},  // a chunk of more rows than multiprocessors
      {{100, 64, 1000}, 32, DType::bf16},
      {{37, 48, 1000}, 100, DType::bf16},  // one chunk larger than the rows
      {{50, 40, 1000}, 16, DType::f32},    // fp32 throughout: g stays fp32
      // bf16 logits: the gradient in place at a row pitch of vocab
      {{100, 64, 50304}, 32, DType::bf16, DType::bf16},
      {{300, 32, 50304}, 300, DType::bf16, DType::bf16},
      {{37, 48, 1000}, 100, DType::bf16, DType::bf16},
  };
  std::uint64_t seed = 21;
  for (const auto& c : cases) check_classifier(c, seed++);
}

// ---- the vocabulary-parallel classifier ----
//
// Each slice on the GPU against the same slice on the CPU (fp32 on the rounded values),
// the whole pipeline on each side: stats per slice, gathered in rank order, combined,
// then backward per slice from the combined lse. The slice statistics are log-sum-exps
// and logits, compared as the losses above; the gradients as the fused classifier's,
// against the magnitudes |g_slice| |embedding_slice| and |g_slice|^T |x|.

struct VocabParallelCase {
  std::int64_t rows, channels;
  std::vector<std::int64_t> starts;  // slice s: rows [starts[s], starts[s + 1]) of the embedding
  std::int64_t chunk_rows;
  DType dtype;
  DType logits = DType::f32;  // the scratch's dtype
};

std::string describe(const VocabParallelCase& c) {
  std::string slices;
  for (const std::int64_t start : c.starts) {
    slices += ' ';
    slices += std::to_string(start);
  }
  return std::to_string(c.rows) + " rows, " + std::to_string(c.channels) + " channels, slices at" + slices +
         ", chunks of " + std::to_string(c.chunk_rows) + ", " + std::string(dtype_name(c.dtype)) + ", " +
         std::string(dtype_name(c.logits)) + " logits";
}

std::vector<float> rows_of(const std::vector<float>& table, std::int64_t begin, std::int64_t end, std::int64_t width) {
  return {table.begin() + begin * width, table.begin() + end * width};
}

void check_vocab_parallel(const VocabParallelCase& c, std::uint64_t seed) {
  const bool bf16 = c.dtype == DType::bf16;
  const bool exact = c.logits == DType::bf16;
  const std::int64_t rows = c.rows, C = c.channels, vocab = c.starts.back();
  const int tp = static_cast<int>(c.starts.size()) - 1;
  const double grad_scale = 1.0 / static_cast<double>(rows);
  std::mt19937_64 rng(seed);
  auto x = exact ? exact_values(rows * C, rng, 0.5f, 1) : random_values(rows * C, rng, 1.0f, bf16);
  auto embedding = exact ? exact_values(vocab * C, rng, 0.125f, 2) : random_values(vocab * C, rng, 0.2f, bf16);
  auto targets = random_targets(rows, vocab, rng);
  for (int s = 1; s < tp && s + 1 < rows; ++s) targets[s] = static_cast<std::int32_t>(c.starts[s]);  // slice edges
  const auto old_d_embedding = random_values(vocab * C, rng, 1e-3f, false);
  const std::string what = describe(c);

  // |g| over the whole vocabulary, from the CPU kernels, for the gradient tolerances.
  std::vector<float> g(rows * vocab), unused_losses(rows);
  cpu::gemm<float>(Transpose::no, Transpose::yes, rows, vocab, C, 1.0f, x.data(), embedding.data(), 0.0f, g.data());
  cpu::softmax_cross_entropy(host_view(g), host_view(targets), host_view(unused_losses), rows, vocab, true, grad_scale);
  const auto abs_g = absolute(g), abs_x = absolute(x), abs_embedding = absolute(embedding);
  const double gradient_factor = bf16 ? 1.0 / 256 : 1e-4;
  const double d_x_relative = bf16 ? 1.0 / 256 : 1e-6;

  ActivationArray x_gpu(x, c.dtype);
  auto targets_gpu = on_gpu(targets, DType::i32);
  Stream stream(testing::gpu());
  kernels::Workspace workspace(stream, testing::all_workspace_needs());

  // Pass 1 on both sides, slice by slice; each side gathers its own stats.
  std::vector<float> cpu_gathered, gpu_gathered;
  for (int s = 0; s < tp; ++s) {
    const VocabParallelShape shape{rows, C, c.starts[s + 1] - c.starts[s], c.starts[s]};
    auto slice = rows_of(embedding, c.starts[s], c.starts[s + 1], C);
    std::vector<float> scratch(c.chunk_rows * shape.vocab), stats(2 * rows);
    cpu::vocab_parallel_classifier_stats(host_view(x), host_view(slice), host_view(targets), host_view(stats),
                                         host_view(scratch), shape);
    ActivationArray slice_gpu(slice, c.dtype);
    ActivationArray scratch_gpu(std::vector<float>(scratch.size(), 0.0f), c.logits);
    auto stats_gpu = on_gpu(std::vector<float>(2 * rows, std::nanf("")), DType::f32);
    cuda::vocab_parallel_classifier_stats(x_gpu.view(), slice_gpu.view(), targets_gpu.device_view(),
                                          stats_gpu.device_view(), scratch_gpu.view(), shape, workspace, stream);
    stream.synchronize();
    const auto gpu_stats = stats_gpu.download();
    expect_close(gpu_stats, stats, 1e-4, scaled(stats, 0.0, 1e-4),
                 "slice " + std::to_string(s) + " stats (lse, then target logits), " + what);
    cpu_gathered.insert(cpu_gathered.end(), stats.begin(), stats.end());
    gpu_gathered.insert(gpu_gathered.end(), gpu_stats.begin(), gpu_stats.end());
  }

  // Combine: the CPU's own, the GPU's on the CPU's gathered stats (only exp/log differ),
  // and the GPU's on its own.
  std::vector<float> losses(rows), lse(rows);
  cpu::vocab_parallel_combine(host_view(cpu_gathered), tp, rows, host_view(losses), host_view(lse));
  auto gathered_gpu = on_gpu(cpu_gathered, DType::f32);
  auto losses_gpu = on_gpu(std::vector<float>(rows, std::nanf("")), DType::f32);
  auto lse_gpu = on_gpu(std::vector<float>(rows, std::nanf("")), DType::f32);
  cuda::vocab_parallel_combine(gathered_gpu.device_view(), tp, rows, losses_gpu.device_view(), lse_gpu.device_view(),
                               stream);
  stream.synchronize();
  expect_close(lse_gpu.download(), lse, 1e-6, scaled(lse, 0.0, 1e-6), "combined lse of the CPU stats, " + what);
  expect_close(losses_gpu.download(), losses, 1e-6, scaled(lse, 1e-6, 1e-6), "losses of the CPU stats, " + what);
  gathered_gpu.host = gpu_gathered;
  gathered_gpu.upload();
  cuda::vocab_parallel_combine(gathered_gpu.device_view(), tp, rows, losses_gpu.device_view(), lse_gpu.device_view(),
                               stream);
  stream.synchronize();
  expect_close(losses_gpu.download(), losses, 1e-4, scaled(losses, 0.0, 1e-4), "losses, " + what);

  // Pass 2 per slice from each side's lse: overwriting d_embedding, then accumulating.
  for (int s = 0; s < tp; ++s) {
    const VocabParallelShape shape{rows, C, c.starts[s + 1] - c.starts[s], c.starts[s]};
    const std::string slice_what = "slice " + std::to_string(s) + ", " + what;
    auto slice = rows_of(embedding, c.starts[s], c.starts[s + 1], C);
    std::vector<float> scratch(c.chunk_rows * shape.vocab), d_x(rows * C), d_embedding(shape.vocab * C);
    cpu::vocab_parallel_classifier_backward(host_view(x), host_view(slice), host_view(targets), host_view(lse),
                                            grad_scale, host_view(scratch), host_view(d_x), host_view(d_embedding),
                                            false, shape);
    const auto old_slice = rows_of(old_d_embedding, c.starts[s], c.starts[s + 1], C);
    auto accumulated = old_slice;
    cpu::vocab_parallel_classifier_backward(host_view(x), host_view(slice), host_view(targets), host_view(lse),
                                            grad_scale, host_view(scratch), host_view(d_x), host_view(accumulated),
                                            true, shape);

    // Magnitudes from the slice's columns of |g|.
    std::vector<float> abs_g_slice(rows * shape.vocab);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy(abs_g.begin() + r * vocab + c.starts[s], abs_g.begin() + r * vocab + c.starts[s + 1],
                abs_g_slice.begin() + r * shape.vocab);
    }
    const auto abs_slice = rows_of(abs_embedding, c.starts[s], c.starts[s + 1], C);
    std::vector<float> d_x_magnitude(d_x.size()), d_embedding_magnitude(d_embedding.size());
    cpu::gemm<float>(Transpose::no, Transpose::no, rows, C, shape.vocab, 1.0f, abs_g_slice.data(), abs_slice.data(),
                     0.0f, d_x_magnitude.data());
    cpu::gemm<float>(Transpose::yes, Transpose::no, shape.vocab, C, rows, 1.0f, abs_g_slice.data(), abs_x.data(), 0.0f,
                     d_embedding_magnitude.data());

    ActivationArray slice_gpu(slice, c.dtype);
    ActivationArray scratch_gpu(std::vector<float>(scratch.size(), 0.0f), c.logits);
    ActivationArray d_x_gpu(std::vector<float>(d_x.size(), std::nanf("")), c.dtype);
    auto d_embedding_gpu = on_gpu(std::vector<float>(d_embedding.size(), std::nanf("")), DType::f32);
    cuda::vocab_parallel_classifier_backward(x_gpu.view(), slice_gpu.view(), targets_gpu.device_view(),
                                             lse_gpu.device_view(), grad_scale, scratch_gpu.view(), d_x_gpu.view(),
                                             d_embedding_gpu.device_view(), false, shape, workspace, stream);
    stream.synchronize();
    expect_close(d_x_gpu.download(), d_x, d_x_relative, scaled(d_x_magnitude, gradient_factor), "d_x, " + slice_what);
    expect_close(d_embedding_gpu.download(), d_embedding, 1e-6, scaled(d_embedding_magnitude, gradient_factor),
                 "d_embedding, " + slice_what);

    d_embedding_gpu.host = old_slice;
    d_embedding_gpu.upload();
    cuda::vocab_parallel_classifier_backward(x_gpu.view(), slice_gpu.view(), targets_gpu.device_view(),
                                             lse_gpu.device_view(), grad_scale, scratch_gpu.view(), d_x_gpu.view(),
                                             d_embedding_gpu.device_view(), true, shape, workspace, stream);
    stream.synchronize();
    std::vector<double> accumulate_tolerance = scaled(d_embedding_magnitude, gradient_factor);
    for (std::size_t i = 0; i < accumulate_tolerance.size(); ++i)
      accumulate_tolerance[i] += 1e-6 * std::abs(old_slice[i]);
    expect_close(d_embedding_gpu.download(), accumulated, 1e-6, accumulate_tolerance,
                 "d_embedding accumulated, " + slice_what);
  }
}

TEST(CudaVocabParallelClassifier, MatchesTheCpu) {
  ADAMANT_REQUIRE_GPU();
  const std::vector<VocabParallelCase> cases = {
      {100, 64, {0, 25152, 50304}, 32, DType::bf16},               // GPT vocabulary, T = 2; last chunk of 4 rows
      {100, 64, {0, 1000}, 32, DType::bf16},                       // T = 1
      {100, 64, {0, 333, 667, 1000}, 32, DType::bf16},             // T = 3, uneven and odd slices: the scalar row path
      {37, 48, {0, 512, 1024, 1536}, 100, DType::bf16},            // one chunk larger than the rows
      {50, 40, {0, 400, 1000}, 16, DType::f32},                    // fp32 throughout: g stays fp32
      {100, 64, {0, 25152, 50304}, 32, DType::bf16, DType::bf16},  // bf16 logits, eight-wide groups
      {100, 64, {0, 333, 667, 1000}, 32, DType::bf16, DType::bf16},  // bf16 logits, the scalar row path
  };
  std::uint64_t seed = 31;
  for (const auto& c : cases) check_vocab_parallel(c, seed++);
}

}  // namespace
}  // namespace adamant::kernels
