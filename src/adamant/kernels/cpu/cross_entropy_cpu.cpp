#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

namespace {

// exp for x <= 0 (softmax inputs after subtracting the row max), branch-free so the
// loop vectorises: 2^n * p(r) with r = x - n ln2 in [-ln2/2, ln2/2] and a degree-6
// Taylor polynomial (relative error < 2e-7, about one fp32 ulp). Below -87 the true
// value is under FLT_MIN and counts as 0.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693145751953125f;  // ln 2 split so n * kLn2High is exact
  constexpr float kLn2Low = 1.42860682030941723212e-6f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float clamped = x < -87.0f ? -87.0f : x;
  const float shifted = clamped * kLog2e + kRoundMagic;
  const float n = shifted - kRoundMagic;
  const float r = (clamped - n * kLn2High) - n * kLn2Low;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const std::int32_t exponent = std::bit_cast<std::int32_t>(shifted) - std::bit_cast<std::int32_t>(kRoundMagic);
  const float scale = std::bit_cast<float>((exponent + 127) << 23);
  return x < -87.0f ? 0.0f : p * scale;
}

template <typename T>
T exp_nonpositive_of(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_nonpositive(x);
  } else {
    return std::exp(x);  // fp64 is the reference path: exact library exp
  }
}

template <typename T>
void softmax_cross_entropy_rows(T* logits, const std::int32_t* targets, T* losses, std::int64_t rows,
                                std::int64_t vocab, bool with_grad, T grad_scale) {
  // `omp simd` reductions let the compiler vectorise the max and the sum; the order of
  // the partial sums is fixed at compile time, so results are still bitwise repeatable.
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinWork)
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = logits + r * vocab;
    const std::int64_t target = targets[r];
    const T target_logit = row[target];
    T row_max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : row_max)
    for (std::int64_t v = 0; v < vocab; ++v) row_max = std::max(row_max, row[v]);
    // Keep exp(logit - max) in place: the gradient pass reuses it instead of a second exp.
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < vocab; ++v) {
      const T e = exp_nonpositive_of(row[v] - row_max);
      row[v] = e;
      sum += e;
    }
    losses[r] = std::log(sum) + row_max - target_logit;
    if (with_grad) {
      const T factor = grad_scale / sum;
#pragma omp simd
      for (std::int64_t v = 0; v < vocab; ++v) row[v] *= factor;
      row[target] -= grad_scale;
    }
  }
}

// The two statistics of rows [0, rows) of logits [rows, vocab] over a vocabulary slice
// starting at vocab_start: slice_lse[r] = logsumexp(logits[r]), target_logit[r] =
// logits[r, targets[r] - vocab_start] if that column is in the slice, else 0.
template <typename T>
void slice_statistics(const T* logits, const std::int32_t* targets, T* slice_lse, T* target_logit, std::int64_t rows,
                      std::int64_t vocab, std::int64_t vocab_start) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinWork)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = logits + r * vocab;
    T row_max = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : row_max)
    for (std::int64_t v = 0; v < vocab; ++v) row_max = std::max(row_max, row[v]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < vocab; ++v) sum += exp_nonpositive_of(row[v] - row_max);
    slice_lse[r] = std::log(sum) + row_max;
    const std::int64_t target = targets[r] - vocab_start;
    target_logit[r] = target >= 0 && target < vocab ? row[target] : T(0);
  }
}

// In place: logits[r, v] becomes grad_scale * (exp(logits[r, v] - lse[r]) - onehot), the
// one-hot at column targets[r] - vocab_start when that is in the slice. lse is the
// log-sum-exp over the whole vocabulary, so logits[r, v] - lse[r] <= 0.
template <typename T>
void slice_gradient(T* logits, const std::int32_t* targets, const T* lse, std::int64_t rows, std::int64_t vocab,
                    std::int64_t vocab_start, T grad_scale) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinWork)
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = logits + r * vocab;
    const T row_lse = lse[r];
#pragma omp simd
    for (std::int64_t v = 0; v < vocab; ++v) row[v] = grad_scale * exp_nonpositive_of(row[v] - row_lse);
    const std::int64_t target = targets[r] - vocab_start;
    if (target >= 0 && target < vocab) row[target] -= grad_scale;
  }
}

}  // namespace

void softmax_cross_entropy(Tensor logits, const Tensor& targets, Tensor losses, std::int64_t rows, std::int64_t vocab,
                           bool with_grad, double grad_scale) {
  with_float_type(logits, [&]<typename T>() {
    softmax_cross_entropy_rows<T>(logits.ptr<T>(), targets.ptr<std::int32_t>(), losses.ptr<T>(), rows, vocab, with_grad,
                                  static_cast<T>(grad_scale));
  });
}

void fused_classifier(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor losses,
                      Tensor logits_scratch, double grad_scale, Tensor d_x, Tensor d_embedding,
                      bool accumulate_d_embedding, const ClassifierShape& shape) {
  with_float_type(x, [&]<typename T>() {
    const std::int64_t C = shape.channels, V = shape.vocab;
    const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / V;
    const bool with_grad = d_x.data != nullptr;
    const T* x_data = x.ptr<T>();
    const T* e_data = embedding.ptr<T>();
    const std::int32_t* target_data = targets.ptr<std::int32_t>();
    T* loss_data = losses.ptr<T>();
    T* logits = logits_scratch.ptr<T>();
    for (std::int64_t r0 = 0; r0 < shape.rows; r0 += chunk_rows) {
      const std::int64_t n = std::min(chunk_rows, shape.rows - r0);
      const T* x_chunk = x_data + r0 * C;
      gemm<T>(Transpose::no, Transpose::yes, n, V, C, T(1), x_chunk, e_data, T(0), logits);
      softmax_cross_entropy_rows<T>(logits, target_data + r0, loss_data + r0, n, V, with_grad,
                                    static_cast<T>(grad_scale));
      if (!with_grad) continue;
      gemm<T>(Transpose::no, Transpose::no, n, C, V, T(1), logits, e_data, T(0), d_x.ptr<T>() + r0 * C);
      const T beta = (r0 == 0 && !accumulate_d_embedding) ? T(0) : T(1);
      gemm<T>(Transpose::yes, Transpose::no, V, C, n, T(1), logits, x_chunk, beta, d_embedding.ptr<T>());
    }
  });
}

void vocab_parallel_classifier_stats(const Tensor& x, const Tensor& embedding, const Tensor& targets, Tensor stats,
                                     Tensor logits_scratch, const VocabParallelShape& shape) {
  with_float_type(x, [&]<typename T>() {
    const std::int64_t C = shape.channels, V = shape.vocab;
    const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / V;
    const T* x_data = x.ptr<T>();
    T* slice_lse = stats.ptr<T>();
    T* target_logit = slice_lse + shape.rows;
    T* logits = logits_scratch.ptr<T>();
    for (std::int64_t r0 = 0; r0 < shape.rows; r0 += chunk_rows) {
      const std::int64_t n = std::min(chunk_rows, shape.rows - r0);
      gemm<T>(Transpose::no, Transpose::yes, n, V, C, T(1), x_data + r0 * C, embedding.ptr<T>(), T(0), logits);
      slice_statistics<T>(logits, targets.ptr<std::int32_t>() + r0, slice_lse + r0, target_logit + r0, n, V,
                          shape.vocab_start);
    }
  });
}

void vocab_parallel_combine(const Tensor& gathered, int tp_size, std::int64_t rows, Tensor losses, Tensor lse) {
  with_float_type(gathered, [&]<typename T>() {
    const T* stats = gathered.ptr<T>();
    T* loss_data = losses.ptr<T>();
    T* lse_data = lse.ptr<T>();
    // Rank t's slice_lse of row r is stats[2 t rows + r], its target logit stats[(2 t + 1) rows + r].
    for (std::int64_t r = 0; r < rows; ++r) {
      T row_max = -std::numeric_limits<T>::infinity();
      for (int t = 0; t < tp_size; ++t) row_max = std::max(row_max, stats[2 * t * rows + r]);
      T sum = 0, target_logit = 0;
      for (int t = 0; t < tp_size; ++t) {
        sum += std::exp(stats[2 * t * rows + r] - row_max);
        target_logit += stats[(2 * t + 1) * rows + r];
      }
      lse_data[r] = std::log(sum) + row_max;
      loss_data[r] = lse_data[r] - target_logit;
    }
  });
}

void vocab_parallel_classifier_backward(const Tensor& x, const Tensor& embedding, const Tensor& targets,
                                        const Tensor& lse, double grad_scale, Tensor logits_scratch, Tensor d_x,
                                        Tensor d_embedding, bool accumulate_d_embedding,
                                        const VocabParallelShape& shape) {
  with_float_type(x, [&]<typename T>() {
    const std::int64_t C = shape.channels, V = shape.vocab;
    const std::int64_t chunk_rows = static_cast<std::int64_t>(logits_scratch.numel()) / V;
    const T* x_data = x.ptr<T>();
    const T* e_data = embedding.ptr<T>();
    T* logits = logits_scratch.ptr<T>();
    T* d_embedding_data = d_embedding.ptr<T>();
    if (shape.rows == 0 && !accumulate_d_embedding) std::fill(d_embedding_data, d_embedding_data + V * C, T(0));
    for (std::int64_t r0 = 0; r0 < shape.rows; r0 += chunk_rows) {
      const std::int64_t n = std::min(chunk_rows, shape.rows - r0);
      const T* x_chunk = x_data + r0 * C;
      gemm<T>(Transpose::no, Transpose::yes, n, V, C, T(1), x_chunk, e_data, T(0), logits);
      slice_gradient<T>(logits, targets.ptr<std::int32_t>() + r0, lse.ptr<T>() + r0, n, V, shape.vocab_start,
                        static_cast<T>(grad_scale));
      gemm<T>(Transpose::no, Transpose::no, n, C, V, T(1), logits, e_data, T(0), d_x.ptr<T>() + r0 * C);
      const T beta = (r0 == 0 && !accumulate_d_embedding) ? T(0) : T(1);
      gemm<T>(Transpose::yes, Transpose::no, V, C, n, T(1), logits, x_chunk, beta, d_embedding_data);
    }
  });
}

}  // namespace adamant::kernels::cpu
