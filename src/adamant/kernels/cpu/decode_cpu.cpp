// Readable decoding-step kernels: fp64 sums for the attention, the (sequence, head)
// pairs split over the threads.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/decode.h"

namespace adamant::kernels::cpu {

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels) {
  with_float_type(word, [&]<typename T>() {
    const std::int32_t* token_ids = tokens.ptr<std::int32_t>();
    const std::int32_t* position_ids = positions.ptr<std::int32_t>();
    for (std::int64_t b = 0; b < batch; ++b) {
      const T* w = word.ptr<T>() + static_cast<std::int64_t>(token_ids[b]) * channels;
      const T* p = position.ptr<T>() + static_cast<std::int64_t>(position_ids[b]) * channels;
      T* o = out.ptr<T>() + b * channels;
      for (std::int64_t c = 0; c < channels; ++c) o[c] = w[c] + p[c];
    }
  });
}

void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape) {
  const std::int64_t B = shape.batch, H = shape.heads, D = shape.head_dim, W = H * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  with_float_type(qkv, [&]<typename T>() {
    const std::int32_t* position_ids = positions.ptr<std::int32_t>();
    for (std::int64_t b = 0; b < B; ++b) {  // this token's key and value, before any head reads them
      const T* fresh = qkv.ptr<T>() + b * 3 * W;
      std::copy(fresh + W, fresh + 3 * W, cache.ptr<T>() + (b * shape.capacity + position_ids[b]) * 3 * W + W);
    }
    // One (sequence, head) per iteration, each with its own row of scores; fp64 sums.
    std::vector<double> scores(static_cast<std::size_t>(B * H * shape.capacity));
    const bool parallel = B * H * (position_ids[0] + 1) * D >= kParallelMinWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t bh = 0; bh < B * H; ++bh) {
      const std::int64_t b = bh / H, h = bh % H, now = position_ids[b];
      const T* q = qkv.ptr<T>() + b * 3 * W + h * D;
      const T* sequence = cache.ptr<T>() + b * shape.capacity * 3 * W;
      double* score = scores.data() + bh * shape.capacity;
      double max_score = -INFINITY;
      for (std::int64_t t = 0; t <= now; ++t) {
        const T* k = sequence + t * 3 * W + W + h * D;
        double dot = 0.0;
#pragma omp simd reduction(+ : dot)
        for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * static_cast<double>(k[d]);
        score[t] = dot * scale;
        max_score = std::max(max_score, score[t]);
      }
      double total = 0.0;
      for (std::int64_t t = 0; t <= now; ++t) {
        score[t] = std::exp(score[t] - max_score);
        total += score[t];
      }
      double sum[kMaxDecodeHeadDim] = {};
      for (std::int64_t t = 0; t <= now; ++t) {  // the value rows in order, each read once and contiguously
        const T* v = sequence + t * 3 * W + 2 * W + h * D;
        const double p = score[t];
#pragma omp simd
        for (std::int64_t d = 0; d < D; ++d) sum[d] += p * static_cast<double>(v[d]);
      }
      T* o = out.ptr<T>() + (b * H + h) * D;
      for (std::int64_t d = 0; d < D; ++d) o[d] = static_cast<T>(sum[d] / total);
    }
  });
}

void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked) {
  struct Entry {
    std::uint32_t key;
    std::int32_t id;
  };
  // Larger first, the lower id first among equal values: the order of model::sample_token.
  const auto before = [](const Entry& a, const Entry& b) { return a.key > b.key || (a.key == b.key && a.id < b.id); };
  std::vector<Entry> kept;
  kept.reserve(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits.ptr<float>() + r * row_stride;
    // One pass with the k best so far in a heap whose top is the worst of them. Ids come in
    // increasing order, so a later id with the worst one's key never displaces it.
    kept.clear();
    for (std::int32_t v = 0; v < vocab; ++v) {
      if (v == masked) continue;
      const Entry entry{decode_order_key(row[v]), v};
      if (static_cast<std::int64_t>(kept.size()) < k) {
        kept.push_back(entry);
        std::push_heap(kept.begin(), kept.end(), before);
      } else if (entry.key > kept.front().key) {
        std::pop_heap(kept.begin(), kept.end(), before);
        kept.back() = entry;
        std::push_heap(kept.begin(), kept.end(), before);
      }
    }
    std::sort_heap(kept.begin(), kept.end(), before);
    for (std::int64_t i = 0; i < k; ++i) {
      ids.ptr<std::int32_t>()[r * k + i] = kept[static_cast<std::size_t>(i)].id;
      values.ptr<float>()[r * k + i] = row[kept[static_cast<std::size_t>(i)].id];
    }
  }
}

}  // namespace adamant::kernels::cpu
