// The decoding step's linear layer on the CPU with bf16 weights and fp32 activations.
//
// One new row per sequence makes the layer a matrix-vector product: every weight is read once
// per step and used for a handful of multiply-adds, so memory bandwidth sets the speed, and
// bf16 weights halve the bytes of fp32 ones. The portable loop is the readable reference; on
// x86-64 CPUs with AVX2 and FMA a vectorised loop widens 8 bf16 weights at a time to fp32 and
// keeps several output features in flight. Both sum in fp32; threads split the output features.
#include <algorithm>
#include <cstdint>

#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/decode.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace adamant::kernels::cpu {

namespace {

struct Operands {
  const float* in;
  const std::uint16_t* weight;
  const float* bias;      // nullptr: none
  const float* residual;  // nullptr: none
  float* out;
  std::int64_t rows, in_features, out_features;
};

float finish(const Operands& op, std::int64_t r, std::int64_t n, float product) {
  float value = product + (op.bias != nullptr ? op.bias[n] : 0.0f);
  if (op.residual != nullptr) value += op.residual[r * op.out_features + n];
  return value;
}

// Output features [first, last) of every row.
void features_portable(const Operands& op, std::int64_t first, std::int64_t last) {
  const std::int64_t K = op.in_features;
  for (std::int64_t n = first; n < last; ++n) {
    const std::uint16_t* w = op.weight + n * K;
    for (std::int64_t r = 0; r < op.rows; ++r) {
      const float* x = op.in + r * K;
      float sum = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) sum += x[k] * bf16_to_f32(w[k]);
      op.out[r * op.out_features + n] = finish(op, r, n, sum);
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline __m256 widen_bf16(const std::uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

__attribute__((target("avx2,fma"))) inline float horizontal_sum(__m256 v) {
  const __m128 pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

// kRows rows of the input against kFeatures output features at once: kRows * kFeatures
// accumulators, each weight vector widened once and used for every row.
template <int kRows, int kFeatures>
__attribute__((target("avx2,fma"))) void block_avx2(const Operands& op, std::int64_t row, std::int64_t n) {
  const std::int64_t K = op.in_features, vector_end = K / 8 * 8;
  __m256 acc[kRows][kFeatures];
  for (int r = 0; r < kRows; ++r)
    for (int f = 0; f < kFeatures; ++f) acc[r][f] = _mm256_setzero_ps();
  // The features' rows are one contiguous block; while it is read, the next block is fetched a
  // cache line per step (the block's share of each step), since rows of a few KB end before the
  // hardware prefetcher has ramped up.
  const char* next_block = reinterpret_cast<const char*>(op.weight + (n + kFeatures) * K);
  const char* weight_end = reinterpret_cast<const char*>(op.weight + op.out_features * K);
  const std::int64_t line_step = kFeatures * 16;  // bytes of weights consumed per step
  for (std::int64_t k = 0; k < vector_end; k += 8) {
    const char* ahead = next_block + k / 8 * line_step;
    if (ahead < weight_end) _mm_prefetch(ahead, _MM_HINT_T0);
    __m256 w[kFeatures];
    for (int f = 0; f < kFeatures; ++f) w[f] = widen_bf16(op.weight + (n + f) * K + k);
    for (int r = 0; r < kRows; ++r) {
      const __m256 x = _mm256_loadu_ps(op.in + (row + r) * K + k);
      for (int f = 0; f < kFeatures; ++f) acc[r][f] = _mm256_fmadd_ps(x, w[f], acc[r][f]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int f = 0; f < kFeatures; ++f) {
      float sum = horizontal_sum(acc[r][f]);
      const float* x = op.in + (row + r) * K;
      const std::uint16_t* wf = op.weight + (n + f) * K;
      for (std::int64_t k = vector_end; k < K; ++k) sum += x[k] * bf16_to_f32(wf[k]);
      op.out[(row + r) * op.out_features + n + f] = finish(op, row + r, n + f, sum);
    }
  }
}

template <int kRows>
__attribute__((target("avx2,fma"))) void rows_avx2(const Operands& op, std::int64_t row, std::int64_t first,
                                                   std::int64_t last) {
  constexpr int kFeatures = kRows <= 2 ? 4 : 2;  // accumulators + widened weights fit the 16 registers
  std::int64_t n = first;
  for (; n + kFeatures <= last; n += kFeatures) block_avx2<kRows, kFeatures>(op, row, n);
  for (; n < last; ++n) block_avx2<kRows, 1>(op, row, n);
}

__attribute__((target("avx2,fma"))) void features_avx2(const Operands& op, std::int64_t first, std::int64_t last) {
  std::int64_t row = 0;
  for (; row + 4 <= op.rows; row += 4) rows_avx2<4>(op, row, first, last);
  switch (op.rows - row) {
    case 3:
      rows_avx2<3>(op, row, first, last);
      break;
    case 2:
      rows_avx2<2>(op, row, first, last);
      break;
    case 1:
      rows_avx2<1>(op, row, first, last);
      break;
    default:
      break;
  }
}

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

Operands operands_of(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor& out,
                     const LinearShape& shape, DecodeEpilogue epilogue) {
  return {in.ptr<float>(),
          static_cast<const std::uint16_t*>(weight.data),
          bias.data != nullptr ? bias.ptr<float>() : nullptr,
          epilogue == DecodeEpilogue::residual ? residual.ptr<float>() : nullptr,
          out.ptr<float>(),
          shape.rows,
          shape.in_features,
          shape.out_features};
}

// Splits the output features over the threads in blocks of 16 (whole cache lines of output).
template <typename Features>
void run_features(const Operands& op, Features&& features) {
  constexpr std::int64_t kBlock = 16;
  const std::int64_t blocks = (op.out_features + kBlock - 1) / kBlock;
  const bool parallel = op.rows * op.in_features * op.out_features >= kParallelMinWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t b = 0; b < blocks; ++b) features(op, b * kBlock, std::min(op.out_features, (b + 1) * kBlock));
}

void apply_gelu(Tensor& out, const LinearShape& shape, const DecodeLinearArgs& args) {
  if (args.epilogue == DecodeEpilogue::gelu) gelu_forward(out, out, shape.rows * shape.out_features, args.gelu);
}

}  // namespace

bool decode_linear_bf16_vectorized_available() {
#if defined(__x86_64__)
  return cpu_has_avx2_fma();
#else
  return false;
#endif
}

void decode_linear_bf16_portable(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                                 Tensor out, const LinearShape& shape, const DecodeLinearArgs& args) {
  run_features(operands_of(in, weight, bias, residual, out, shape, args.epilogue), features_portable);
  apply_gelu(out, shape, args);
}

void decode_linear_bf16(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                        const LinearShape& shape, const DecodeLinearArgs& args) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) {
    run_features(operands_of(in, weight, bias, residual, out, shape, args.epilogue), features_avx2);
    apply_gelu(out, shape, args);
    return;
  }
#endif
  decode_linear_bf16_portable(in, weight, bias, residual, out, shape, args);
}

}  // namespace adamant::kernels::cpu
