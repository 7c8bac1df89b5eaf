// Readable decoding-step kernels: fp64 sums for the attention, one (sequence, head)
// at a time.
#include "adamant/kernels/cpu/decode_cpu.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "adamant/kernels/cpu/model_kernels_cpu.h"

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
  const std::int64_t H = shape.heads, D = shape.head_dim, W = H * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  with_float_type(qkv, [&]<typename T>() {
    const std::int32_t* position_ids = positions.ptr<std::int32_t>();
    std::vector<double> scores;
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      const std::int64_t now = position_ids[b];
      const T* fresh = qkv.ptr<T>() + b * 3 * W;
      T* sequence = cache.ptr<T>() + b * shape.capacity * 3 * W;
      std::copy(fresh + W, fresh + 3 * W, sequence + now * 3 * W + W);  // this token's key and value
      scores.resize(static_cast<std::size_t>(now + 1));
      for (std::int64_t h = 0; h < H; ++h) {
        const T* q = fresh + h * D;
        double max_score = -INFINITY;
        for (std::int64_t t = 0; t <= now; ++t) {
          const T* k = sequence + t * 3 * W + W + h * D;
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * static_cast<double>(k[d]);
          scores[t] = dot * scale;
          max_score = std::max(max_score, scores[t]);
        }
        double total = 0.0;
        for (std::int64_t t = 0; t <= now; ++t) {
          scores[t] = std::exp(scores[t] - max_score);
          total += scores[t];
        }
        T* o = out.ptr<T>() + (b * H + h) * D;
        for (std::int64_t d = 0; d < D; ++d) {
          double sum = 0.0;
          for (std::int64_t t = 0; t <= now; ++t)
            sum += scores[t] * static_cast<double>(sequence[t * 3 * W + 2 * W + h * D + d]);
          o[d] = static_cast<T>(sum / total);
        }
      }
    }
  });
}

void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked) {
  std::vector<std::int32_t> order;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits.ptr<float>() + r * row_stride;
    order.resize(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    if (masked >= 0 && masked < vocab) order.erase(order.begin() + masked);
    // Larger first, the lower id first among equal values: the order of model::sample_token.
    const auto before = [&](std::int32_t a, std::int32_t b) {
      const std::uint32_t ka = decode_order_key(row[a]), kb = decode_order_key(row[b]);
      return ka > kb || (ka == kb && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    for (std::int64_t i = 0; i < k; ++i) {
      ids.ptr<std::int32_t>()[r * k + i] = order[static_cast<std::size_t>(i)];
      values.ptr<float>()[r * k + i] = row[order[static_cast<std::size_t>(i)]];
    }
  }
}

}  // namespace adamant::kernels::cpu
