#include <algorithm>

#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

namespace {

// The row of the slice holding `token`, or -1 when another slice holds it.
std::int64_t slice_row(std::int32_t token, const EmbeddingShape& shape) {
  const std::int64_t row = static_cast<std::int64_t>(token) - shape.vocab_start;
  return row >= 0 && row < shape.vocab ? row : -1;
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape) {
  with_float_type(word, [&]<typename T>() {
    const std::int32_t* token_data = tokens.ptr<std::int32_t>();
    const T* word_data = word.ptr<T>();
    const T* position_data = optional_ptr<T>(position);
    T* out_data = out.ptr<T>();
    const std::int64_t C = shape.channels;
#pragma omp parallel for collapse(2) schedule(static) if (shape.batch * shape.seq * C >= kParallelMinWork)
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      for (std::int64_t t = 0; t < shape.seq; ++t) {
        const std::int64_t row = b * shape.seq + t;
        const std::int64_t word_row = slice_row(token_data[row], shape);
        T* o = out_data + row * C;
        if (word_row >= 0) {
          std::copy(word_data + word_row * C, word_data + (word_row + 1) * C, o);
        } else {
          std::fill(o, o + C, T(0));
        }
        if (position_data == nullptr) continue;
        const T* p = position_data + t * C;
        for (std::int64_t c = 0; c < C; ++c) o[c] += p[c];
      }
    }
  });
}

void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape) {
  with_float_type(d_out, [&]<typename T>() {
    const std::int32_t* token_data = tokens.ptr<std::int32_t>();
    const T* dy = d_out.ptr<T>();
    T* d_word_data = d_word.ptr<T>();
    T* d_position_data = optional_ptr<T>(d_position);
    const std::int64_t C = shape.channels;
    if (d_position_data != nullptr) {
#pragma omp parallel for schedule(static) if (shape.batch * shape.seq * C >= kParallelMinWork)
      for (std::int64_t t = 0; t < shape.seq; ++t) {
        T* dp = d_position_data + t * C;
        for (std::int64_t b = 0; b < shape.batch; ++b) {
          const T* g = dy + (b * shape.seq + t) * C;
          for (std::int64_t c = 0; c < C; ++c) dp[c] += g[c];
        }
      }
    }
    // A token may repeat: split by channel blocks so every row of the table is
    // summed in token order by a single thread.
    constexpr std::int64_t kColumnBlock = 32;
    const std::int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
    const std::int64_t rows = shape.batch * shape.seq;
#pragma omp parallel for schedule(static) if (rows * C >= kParallelMinWork)
    for (std::int64_t block = 0; block < blocks; ++block) {
      const std::int64_t c0 = block * kColumnBlock;
      const std::int64_t c1 = std::min(C, c0 + kColumnBlock);
      for (std::int64_t row = 0; row < rows; ++row) {
        const std::int64_t word_row = slice_row(token_data[row], shape);
        if (word_row < 0) continue;
        T* dw = d_word_data + word_row * C;
        const T* g = dy + row * C;
        for (std::int64_t c = c0; c < c1; ++c) dw[c] += g[c];
      }
    }
  });
}

}  // namespace adamant::kernels::cpu
