// The materialised-softmax attention: the readable reference the flash attention
// kernels (CPU and CUDA) are tested against. Not used by the model.
#include <algorithm>
#include <cmath>
#include <limits>

#include "adamant/kernels/cpu/attention_dropout_cpu.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

void attention_forward(const Tensor& qkv, Tensor probs, Tensor out, const AttentionShape& shape,
                       const DropoutArgs& dropout_args) {
  with_float_type(qkv, [&]<typename T>() {
    const std::int64_t B = shape.batch, L = shape.seq, H = shape.heads, D = shape.head_dim, C = H * D;
    const T* qkv_data = qkv.ptr<T>();
    T* probs_data = probs.ptr<T>();
    T* out_data = out.ptr<T>();
    const T scale = T(1) / std::sqrt(static_cast<T>(D));
    const bool use_dropout = dropout_args.probability > 0.0f;
#pragma omp parallel for collapse(3) schedule(static) if (B * H * L * L * D >= kParallelMinWork)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t i = 0; i < L; ++i) {
          const T* q = qkv_data + (b * L + i) * 3 * C + h * D;
          T* p = probs_data + ((b * H + h) * L + i) * L;
          T row_max = -std::numeric_limits<T>::infinity();
          for (std::int64_t j = 0; j <= i; ++j) {
            const T* k = qkv_data + (b * L + j) * 3 * C + C + h * D;
            p[j] = dot(q, k, D) * scale;
            row_max = std::max(row_max, p[j]);
          }
          T sum = 0;
          for (std::int64_t j = 0; j <= i; ++j) {
            p[j] = std::exp(p[j] - row_max);
            sum += p[j];
          }
          const T inv_sum = T(1) / sum;
          for (std::int64_t j = 0; j <= i; ++j) p[j] *= inv_sum;
          std::fill(p + i + 1, p + L, T(0));

          T* o = out_data + (b * L + i) * C + h * D;
          std::fill(o, o + D, T(0));
          DropoutRow<T> mask(dropout_args, b, h, i, L);
          for (std::int64_t j = 0; j <= i; ++j) {
            const T weight = use_dropout ? p[j] * mask.factor(j) : p[j];
            axpy(weight, qkv_data + (b * L + j) * 3 * C + 2 * C + h * D, o, D);
          }
        }
      }
    }
  });
}

void attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& probs, Tensor d_probs_scratch,
                        Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args) {
  with_float_type(qkv, [&]<typename T>() {
    const std::int64_t B = shape.batch, L = shape.seq, H = shape.heads, D = shape.head_dim, C = H * D;
    const T* d_out_data = d_out.ptr<T>();
    const T* qkv_data = qkv.ptr<T>();
    const T* probs_data = probs.ptr<T>();
    T* d_probs_data = d_probs_scratch.ptr<T>();
    T* d_qkv_data = d_qkv.ptr<T>();
    const T scale = T(1) / std::sqrt(static_cast<T>(D));
    const bool use_dropout = dropout_args.probability > 0.0f;
    // One (sample, head) per iteration: its dq, dk, dv slices are written by nobody else,
    // and the key/value gradients accumulate over queries in a fixed order.
#pragma omp parallel for collapse(2) schedule(static) if (B * H * L * L * D >= kParallelMinWork)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t t = 0; t < L; ++t) {
          for (std::int64_t part = 0; part < 3; ++part) {
            T* slice = d_qkv_data + (b * L + t) * 3 * C + part * C + h * D;
            std::fill(slice, slice + D, T(0));
          }
        }
        for (std::int64_t i = 0; i < L; ++i) {
          const T* p = probs_data + ((b * H + h) * L + i) * L;
          T* dp = d_probs_data + ((b * H + h) * L + i) * L;
          const T* d_o = d_out_data + (b * L + i) * C + h * D;
          DropoutRow<T> mask(dropout_args, b, h, i, L);
          T weighted_sum = 0;
          for (std::int64_t j = 0; j <= i; ++j) {
            const std::int64_t token_j = (b * L + j) * 3 * C + h * D;
            const T factor = use_dropout ? mask.factor(j) : T(1);
            dp[j] = dot(d_o, qkv_data + token_j + 2 * C, D) * factor;   // through the dropout: dL/dprobs
            axpy(p[j] * factor, d_o, d_qkv_data + token_j + 2 * C, D);  // dv_j
            weighted_sum += p[j] * dp[j];
          }
          const T* q = qkv_data + (b * L + i) * 3 * C + h * D;
          T* dq = d_qkv_data + (b * L + i) * 3 * C + h * D;
          for (std::int64_t j = 0; j <= i; ++j) {
            const std::int64_t token_j = (b * L + j) * 3 * C + h * D;
            const T d_score = p[j] * (dp[j] - weighted_sum) * scale;  // softmax backward, then the 1/sqrt(d)
            axpy(d_score, qkv_data + token_j + C, dq, D);
            axpy(d_score, q, d_qkv_data + token_j + C, D);
          }
        }
      }
    }
  });
}

}  // namespace adamant::kernels::cpu
