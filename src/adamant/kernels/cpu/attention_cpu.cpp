#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "adamant/kernels/attention_dropout_layout.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

namespace {

// Dropout factors (0 or 1/(1-p)) along one query row of one sample's attention, in the
// draw layout of kernels/attention_dropout_layout.h: the eight draws of a 16-key block
// serve its 16 keys, so they are made together when the row enters the block.
template <typename T>
class DropoutRow {
 public:
  DropoutRow(const DropoutArgs& args, std::int64_t sample, std::int64_t head, std::int64_t query, std::int64_t seq)
      : args_(args),
        sample_(static_cast<std::uint64_t>(sample)),
        head_(static_cast<std::uint64_t>(head)),
        query_(static_cast<std::uint64_t>(query)),
        blocks_(attention_dropout_layout::blocks_per_row(static_cast<std::uint64_t>(seq))),
        keep_scale_(T(1) / (T(1) - static_cast<T>(args.probability))) {}

  T factor(std::int64_t key) {
    namespace layout = attention_dropout_layout;
    const auto column = static_cast<std::uint64_t>(key);
    const std::uint64_t block = column / layout::kBlock;
    if (block != cached_block_) {
      for (std::uint64_t lane = 0; lane < 8; ++lane) {
        draws_[lane] = dropout_bits(
            args_, sample_, layout::draw_index(head_, query_ / layout::kBlock, block, query_ % 8, lane, blocks_));
      }
      cached_block_ = block;
    }
    const std::uint32_t bits = draws_[column % 8][layout::element_word(query_, column)];
    return dropout_keeps(bits, args_.probability) ? keep_scale_ : T(0);
  }

 private:
  const DropoutArgs& args_;
  std::uint64_t sample_;
  std::uint64_t head_;
  std::uint64_t query_;
  std::uint64_t blocks_;
  T keep_scale_;
  std::uint64_t cached_block_ = std::numeric_limits<std::uint64_t>::max();
  std::array<PhiloxCounter, 8> draws_{};
};

template <typename T>
T dot(const T* a, const T* b, std::int64_t n) {
  T sum = 0;
  for (std::int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

template <typename T>
void axpy(T alpha, const T* x, T* y, std::int64_t n) {
  for (std::int64_t d = 0; d < n; ++d) y[d] += alpha * x[d];
}

}  // namespace

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
