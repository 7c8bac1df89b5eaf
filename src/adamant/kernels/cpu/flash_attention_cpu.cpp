// Flash attention on the CPU: the blocked algorithm of the CUDA kernels
// (kernels/cuda/flash_attention_*.cu) with the same logsumexp and dropout layouts, so
// the model keeps the same activations on both backends. No probabilities are kept:
//   forward  per (sample, head, block of kQueryBlock queries): key tiles of kKeyTile
//            rows up to the diagonal, an online softmax (running row maximum and
//            denominator), the output rescaled as the maximum grows; then each row's
//            logsumexp = max + log(denominator);
//   backward a key pass per (sample, head, key tile) accumulates dk and dv over the
//            query rows at or after the tile, and a query pass per (sample, head,
//            query block) accumulates dq, both recomputing the probabilities from the
//            logsumexp, with dS = P * (dP - rowsum(dO * O)).
// Each pass writes disjoint slices of its output and sums in a fixed order, so the
// results do not depend on the thread count.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "adamant/kernels/cpu/attention_dropout_cpu.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/flash_attention.h"

namespace adamant::kernels::cpu {

namespace {

constexpr std::int64_t kQueryBlock = 64;  // query rows per forward or query-pass block
constexpr std::int64_t kKeyTile = 64;     // key rows per tile, as the CUDA kernels stream them

// Strided views of one (sample, head) of the [batch, seq, 3, heads, head_dim] projection and of
// the [batch, seq, heads, head_dim] output; logsumexp rows are [batch, heads, seq].
struct HeadView {
  std::int64_t sample, head, seq, head_dim, channels;

  std::int64_t qkv_row(std::int64_t t, std::int64_t part) const {
    return (sample * seq + t) * 3 * channels + part * channels + head * head_dim;
  }
  std::int64_t out_row(std::int64_t t) const { return (sample * seq + t) * channels + head * head_dim; }
  std::int64_t stat_row(std::int64_t t, std::int64_t heads) const { return (sample * heads + head) * seq + t; }
};

template <typename T>
void forward_block(const T* qkv, T* out, T* logsumexp, const HeadView& view, std::int64_t heads,
                   std::int64_t first_query, const DropoutArgs& dropout) {
  const std::int64_t L = view.seq, D = view.head_dim;
  const std::int64_t rows = std::min(kQueryBlock, L - first_query);
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  const bool use_dropout = dropout.probability > 0.0f;
  std::array<T, kQueryBlock> row_max, denominator;
  std::array<T, kKeyTile> scores;
  row_max.fill(-std::numeric_limits<T>::infinity());
  denominator.fill(T(0));
  for (std::int64_t r = 0; r < rows; ++r) {
    T* o = out + view.out_row(first_query + r);
    std::fill(o, o + D, T(0));
  }
  const std::int64_t last_query = first_query + rows - 1;
  for (std::int64_t first_key = 0; first_key <= last_query; first_key += kKeyTile) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = first_query + r;
      const std::int64_t keys = std::min(kKeyTile, i + 1 - first_key);  // causal: keys up to the query
      if (keys <= 0) continue;
      const T* q = qkv + view.qkv_row(i, 0);
      T tile_max = -std::numeric_limits<T>::infinity();
      for (std::int64_t c = 0; c < keys; ++c) {
        scores[c] = dot(q, qkv + view.qkv_row(first_key + c, 1), D) * scale;
        tile_max = std::max(tile_max, scores[c]);
      }
      const T new_max = std::max(row_max[r], tile_max);
      const T rescale = std::exp(row_max[r] - new_max);  // 0 on the first tile (max was -inf)
      T* o = out + view.out_row(i);
      for (std::int64_t d = 0; d < D; ++d) o[d] *= rescale;
      T sum = 0;
      DropoutRow<T> mask(dropout, view.sample, view.head, i, L);
      for (std::int64_t c = 0; c < keys; ++c) {
        const T p = std::exp(scores[c] - new_max);
        sum += p;
        const T weight = use_dropout ? p * mask.factor(first_key + c) : p;
        axpy(weight, qkv + view.qkv_row(first_key + c, 2), o, D);
      }
      denominator[r] = denominator[r] * rescale + sum;
      row_max[r] = new_max;
    }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = first_query + r;
    T* o = out + view.out_row(i);
    const T inverse = T(1) / denominator[r];
    for (std::int64_t d = 0; d < D; ++d) o[d] *= inverse;
    logsumexp[view.stat_row(i, heads)] = row_max[r] + std::log(denominator[r]);
  }
}

// What both backward passes recompute for one (query, key) pair.
template <typename T>
struct ScoreGrad {
  T probability_kept;  // P * dropout factor: the weight of v_j in o_i
  T d_score;           // dL/d(q_i . k_j), the 1/sqrt(d) included
};

template <typename T>
class BackwardRow {
 public:
  BackwardRow(const T* qkv, const T* d_out, const T* out, const T* logsumexp, const HeadView& view, std::int64_t heads,
              std::int64_t query, const DropoutArgs& dropout)
      : qkv_(qkv),
        view_(view),
        q_(qkv + view.qkv_row(query, 0)),
        d_o_(d_out + view.out_row(query)),
        lse_(logsumexp[view.stat_row(query, heads)]),
        // rowsum(dO * O) = sum_j P_ij dP_ij: the softmax backward's correction term.
        correction_(dot(d_o_, out + view.out_row(query), view.head_dim)),
        scale_(T(1) / std::sqrt(static_cast<T>(view.head_dim))),
        use_dropout_(dropout.probability > 0.0f),
        mask_(dropout, view.sample, view.head, query, view.seq) {}

  const T* query() const { return q_; }
  const T* d_out() const { return d_o_; }

  ScoreGrad<T> at(std::int64_t key) {
    const std::int64_t D = view_.head_dim;
    const T p = std::exp(dot(q_, qkv_ + view_.qkv_row(key, 1), D) * scale_ - lse_);
    const T factor = use_dropout_ ? mask_.factor(key) : T(1);
    const T d_p = dot(d_o_, qkv_ + view_.qkv_row(key, 2), D) * factor;
    return {p * factor, p * (d_p - correction_) * scale_};
  }

 private:
  const T* qkv_;
  const HeadView& view_;
  const T* q_;
  const T* d_o_;
  T lse_;
  T correction_;
  T scale_;
  bool use_dropout_;
  DropoutRow<T> mask_;
};

template <typename T>
struct BackwardOperands {
  const T* d_out;
  const T* qkv;
  const T* out;
  const T* logsumexp;
  T* d_qkv;
};

// dk and dv of keys [first_key, first_key + kKeyTile): sums over the queries at or after each key.
template <typename T>
void key_pass(const BackwardOperands<T>& ops, const HeadView& view, std::int64_t heads, std::int64_t first_key,
              const DropoutArgs& dropout) {
  const std::int64_t L = view.seq, D = view.head_dim;
  const std::int64_t keys = std::min(kKeyTile, L - first_key);
  for (std::int64_t c = 0; c < keys; ++c) {
    for (const std::int64_t part : {1, 2}) {
      T* slice = ops.d_qkv + view.qkv_row(first_key + c, part);
      std::fill(slice, slice + D, T(0));
    }
  }
  for (std::int64_t i = first_key; i < L; ++i) {
    BackwardRow<T> row(ops.qkv, ops.d_out, ops.out, ops.logsumexp, view, heads, i, dropout);
    const std::int64_t last = std::min(keys, i + 1 - first_key);
    for (std::int64_t c = 0; c < last; ++c) {
      const std::int64_t j = first_key + c;
      const ScoreGrad<T> grad = row.at(j);
      axpy(grad.probability_kept, row.d_out(), ops.d_qkv + view.qkv_row(j, 2), D);  // dv_j
      axpy(grad.d_score, row.query(), ops.d_qkv + view.qkv_row(j, 1), D);           // dk_j
    }
  }
}

// dq of queries [first_query, first_query + kQueryBlock): sums over the keys up to each query.
template <typename T>
void query_pass(const BackwardOperands<T>& ops, const HeadView& view, std::int64_t heads, std::int64_t first_query,
                const DropoutArgs& dropout) {
  const std::int64_t D = view.head_dim;
  const std::int64_t rows = std::min(kQueryBlock, view.seq - first_query);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = first_query + r;
    T* dq = ops.d_qkv + view.qkv_row(i, 0);
    std::fill(dq, dq + D, T(0));
    BackwardRow<T> row(ops.qkv, ops.d_out, ops.out, ops.logsumexp, view, heads, i, dropout);
    for (std::int64_t j = 0; j <= i; ++j) axpy(row.at(j).d_score, ops.qkv + view.qkv_row(j, 1), dq, D);
  }
}

std::int64_t blocks_of(std::int64_t seq, std::int64_t rows) { return (seq + rows - 1) / rows; }

}  // namespace

void flash_attention_forward(const Tensor& qkv, Tensor out, Tensor logsumexp, const AttentionShape& shape,
                             const DropoutArgs& dropout_args) {
  with_float_type(qkv, [&]<typename T>() {
    const std::int64_t B = shape.batch, L = shape.seq, H = shape.heads, D = shape.head_dim;
    const std::int64_t query_blocks = blocks_of(L, kQueryBlock);
#pragma omp parallel for collapse(3) schedule(dynamic) if (B * H * L * L * D >= kParallelMinWork)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t block = 0; block < query_blocks; ++block) {
          const HeadView view{b, h, L, D, H * D};
          forward_block(qkv.ptr<T>(), out.ptr<T>(), logsumexp.ptr<T>(), view, H, block * kQueryBlock, dropout_args);
        }
      }
    }
  });
}

void flash_attention_backward(const Tensor& d_out, const Tensor& qkv, const Tensor& out, const Tensor& logsumexp,
                              Tensor d_qkv, const AttentionShape& shape, const DropoutArgs& dropout_args) {
  with_float_type(qkv, [&]<typename T>() {
    const std::int64_t B = shape.batch, L = shape.seq, H = shape.heads, D = shape.head_dim;
    const BackwardOperands<T> ops{d_out.ptr<T>(), qkv.ptr<T>(), out.ptr<T>(), logsumexp.ptr<T>(), d_qkv.ptr<T>()};
    const bool parallel = B * H * L * L * D >= kParallelMinWork;
    const std::int64_t key_tiles = blocks_of(L, kKeyTile), query_blocks = blocks_of(L, kQueryBlock);
#pragma omp parallel for collapse(3) schedule(dynamic) if (parallel)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t tile = 0; tile < key_tiles; ++tile) {
          key_pass(ops, HeadView{b, h, L, D, H * D}, H, tile * kKeyTile, dropout_args);
        }
      }
    }
#pragma omp parallel for collapse(3) schedule(dynamic) if (parallel)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t block = 0; block < query_blocks; ++block) {
          query_pass(ops, HeadView{b, h, L, D, H * D}, H, block * kQueryBlock, dropout_args);
        }
      }
    }
  });
}

}  // namespace adamant::kernels::cpu
