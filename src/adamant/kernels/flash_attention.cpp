// Dispatch of flash attention (kernels/flash_attention.h) by the device of qkv.
// The CPU path is a reference built on the probability-based CPU kernels: forward
// keeps their probabilities in the caller's scratch and derives each row's
// logsumexp from them; backward rebuilds the probabilities from the logsumexp
// (the flash recomputation, done row by row) and runs the CPU attention backward.
#include "adamant/kernels/flash_attention.h"

#include <cmath>
#include <type_traits>

#include "adamant/core/error.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#ifdef ADAMANT_HAVE_CUDA
#include "adamant/kernels/cuda/flash_attention_cuda.h"
#endif

namespace adamant::kernels {

namespace {

void check_cpu_operand(const char* op, const char* name, const Tensor& t, DType dtype, std::int64_t numel,
                       bool at_least = false) {
  ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
  ADAMANT_CHECK(t.device.is_cpu(), "{}: operand {} is on {}, qkv on the CPU", op, name, t.device.str());
  ADAMANT_CHECK(t.dtype == dtype, "{}: operand {} is {}, expected {} (qkv's dtype)", op, name, dtype_name(t.dtype),
                dtype_name(dtype));
  const auto actual = static_cast<std::int64_t>(t.numel());
  ADAMANT_CHECK(at_least ? actual >= numel : actual == numel, "{}: operand {} has {} elements, expected {}{}", op, name,
                actual, at_least ? "at least " : "", numel);
}

void check_cpu_common(const char* op, const Tensor& qkv, const AttentionShape& shape) {
  ADAMANT_CHECK(qkv.dtype == DType::f32 || qkv.dtype == DType::f64,
                "{}: qkv is {}; the CPU attention kernels take fp32 or fp64", op, dtype_name(qkv.dtype));
  ADAMANT_CHECK(shape.batch >= 0 && shape.seq >= 0 && shape.heads > 0 && shape.head_dim > 0,
                "{}: shape batch {} seq {} heads {} head_dim {} must be non-negative with heads and head_dim positive",
                op, shape.batch, shape.seq, shape.heads, shape.head_dim);
}

// Row i's logsumexp from its normalised probabilities: at the row's largest
// probability p_m = exp(s_m - lse), so lse = s_m - log(p_m), with p_m >= 1 / (i + 1).
template <typename T>
void logsumexp_from_probs(const T* qkv, const T* probs, T* logsumexp, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, L = shape.seq, H = shape.heads, D = shape.head_dim, C = H * D;
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t i = 0; i < L; ++i) {
        const T* p = probs + ((b * H + h) * L + i) * L;
        std::int64_t largest = 0;
        for (std::int64_t j = 1; j <= i; ++j) {
          if (p[j] > p[largest]) largest = j;
        }
        const T* q = qkv + (b * L + i) * 3 * C + h * D;
        const T* k = qkv + (b * L + largest) * 3 * C + C + h * D;
        T score = 0;
        for (std::int64_t d = 0; d < D; ++d) score += q[d] * k[d];
        logsumexp[(b * H + h) * L + i] = score * scale - std::log(p[largest]);
      }
    }
  }
}

// probs[b, h, i, j] = exp(q_i . k_j / sqrt(d) - logsumexp_i) for j <= i, else 0.
template <typename T>
void probs_from_logsumexp(const T* qkv, const T* logsumexp, T* probs, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, L = shape.seq, H = shape.heads, D = shape.head_dim, C = H * D;
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < H; ++h) {
      for (std::int64_t i = 0; i < L; ++i) {
        T* p = probs + ((b * H + h) * L + i) * L;
        const T* q = qkv + (b * L + i) * 3 * C + h * D;
        const T lse = logsumexp[(b * H + h) * L + i];
        for (std::int64_t j = 0; j < L; ++j) {
          if (j > i) {
            p[j] = T(0);
            continue;
          }
          const T* k = qkv + (b * L + j) * 3 * C + C + h * D;
          T score = 0;
          for (std::int64_t d = 0; d < D; ++d) score += q[d] * k[d];
          p[j] = std::exp(score * scale - lse);
        }
      }
    }
  }
}

// A CPU stream means the device's default stream; a CUDA stream must be on the operands' GPU.
void check_stream(const char* op, const Tensor& qkv, const Stream& stream) {
  ADAMANT_CHECK(stream.device().is_cpu() || stream.device() == qkv.device,
                "{}: operands on {} but the stream is on {}; use a stream of the operands' device", op,
                qkv.device.str(), stream.device().str());
}

#ifndef ADAMANT_HAVE_CUDA
[[noreturn]] void no_cuda(const char* op, const Tensor& qkv) {
  fail("{}: operands on {}, but this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON or run on the CPU",
       op, qkv.device.str());
}
#endif

}  // namespace

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, Tensor probs_scratch,
                             const AttentionShape& shape, const DropoutArgs& dropout_args, const Stream& stream) {
  constexpr const char* kOp = "flash_attention_forward";
  if (qkv.device.is_cuda()) {
    check_stream(kOp, qkv, stream);
#ifdef ADAMANT_HAVE_CUDA
    cuda::flash_attention_forward(qkv, out, logsumexp, shape, dropout_args, stream);
    return;
#else
    no_cuda(kOp, qkv);
#endif
  }
  check_cpu_common(kOp, qkv, shape);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  const std::int64_t probs_numel = flash_forward_cpu_scratch_numel(shape);
  check_cpu_operand(kOp, "qkv", qkv, qkv.dtype, tokens * 3 * channels);
  check_cpu_operand(kOp, "out", out, qkv.dtype, tokens * channels);
  check_cpu_operand(kOp, "logsumexp", logsumexp, qkv.dtype, tokens * shape.heads);
  check_cpu_operand(kOp, "probs_scratch", probs_scratch, qkv.dtype, probs_numel, /*at_least=*/true);
  const Tensor probs = probs_scratch.slice(0, static_cast<std::size_t>(probs_numel));
  cpu::attention_forward(qkv, probs, out, shape, dropout_args);
  cpu::with_float_type(
      qkv, [&]<typename T>() { logsumexp_from_probs<T>(qkv.ptr<T>(), probs.ptr<T>(), logsumexp.ptr<T>(), shape); });
}

void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, Tensor probs_scratch, const AttentionShape& shape,
                              const DropoutArgs& dropout_args, const Stream& stream) {
  constexpr const char* kOp = "flash_attention_backward";
  if (qkv.device.is_cuda()) {
    check_stream(kOp, qkv, stream);
#ifdef ADAMANT_HAVE_CUDA
    cuda::flash_attention_backward(d_out, qkv, out, logsumexp, d_qkv, shape, dropout_args, stream);
    return;
#else
    no_cuda(kOp, qkv);
#endif
  }
  check_cpu_common(kOp, qkv, shape);
  const std::int64_t tokens = shape.batch * shape.seq, channels = shape.heads * shape.head_dim;
  const std::int64_t probs_numel = flash_forward_cpu_scratch_numel(shape);
  check_cpu_operand(kOp, "d_out", d_out, qkv.dtype, tokens * channels);
  check_cpu_operand(kOp, "qkv", qkv, qkv.dtype, tokens * 3 * channels);
  check_cpu_operand(kOp, "out", out, qkv.dtype, tokens * channels);
  check_cpu_operand(kOp, "logsumexp", logsumexp, qkv.dtype, tokens * shape.heads);
  check_cpu_operand(kOp, "d_qkv", d_qkv, qkv.dtype, tokens * 3 * channels);
  check_cpu_operand(kOp, "probs_scratch", probs_scratch, qkv.dtype, flash_backward_cpu_scratch_numel(shape),
                    /*at_least=*/true);
  const auto count = static_cast<std::size_t>(probs_numel);
  const Tensor probs = probs_scratch.slice(0, count);
  const Tensor d_probs = probs_scratch.slice(count, count);
  cpu::with_float_type(
      qkv, [&]<typename T>() { probs_from_logsumexp<T>(qkv.ptr<T>(), logsumexp.ptr<T>(), probs.ptr<T>(), shape); });
  cpu::attention_backward(d_out, qkv, probs, d_probs, d_qkv, shape, dropout_args);
}

}  // namespace adamant::kernels
