#pragma once
// Attention-dropout factors on the CPU in the draw layout of
// kernels/attention_dropout_layout.h, shared by the CPU flash attention and the
// materialised-softmax reference, so both drop exactly the GPU's elements.
#include <array>
#include <cstdint>
#include <limits>

#include "adamant/kernels/attention_dropout_layout.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels::cpu {

// Factors (0 or the keep scale) along one query row of one sample's head: the four draws of
// a 32-key block serve its 32 keys, so they are made together when the row enters the block.
template <typename T>
class DropoutRow {
 public:
  DropoutRow(const DropoutArgs& args, std::int64_t sample, std::int64_t head, std::int64_t query, std::int64_t seq)
      : args_(with_sample_offset(args)),
        sample_(static_cast<std::uint64_t>(sample)),
        head_(static_cast<std::uint64_t>(head)),
        query_(static_cast<std::uint64_t>(query)),
        blocks_(attention_dropout_layout::blocks_of(static_cast<std::uint64_t>(seq))),
        threshold_(attention_dropout_layout::keep_threshold(args.probability)),
        keep_scale_(attention_dropout_layout::keep_scale<T>(args.probability)) {}

  T factor(std::int64_t key) {
    namespace layout = attention_dropout_layout;
    const auto column = static_cast<std::uint64_t>(key);
    const std::uint64_t block = column / layout::kKeyBlock;
    if (block != cached_block_) {
      for (std::uint64_t pair = 0; pair < 4; ++pair) {
        draws_[pair] = dropout_bits<layout::kPhiloxRounds>(
            args_, sample_, layout::draw_index(head_, query_ / layout::kQueryBlock, block, query_ % 8, pair, blocks_));
      }
      cached_block_ = block;
    }
    const std::uint32_t word = draws_[(column % 8) / 2][layout::element_word(column)];
    return layout::keeps(word, layout::element_byte(query_, column), threshold_) ? keep_scale_ : T(0);
  }

 private:
  DropoutArgs args_;
  std::uint64_t sample_;
  std::uint64_t head_;
  std::uint64_t query_;
  attention_dropout_layout::Blocks blocks_;
  std::uint32_t threshold_;
  T keep_scale_;
  std::uint64_t cached_block_ = std::numeric_limits<std::uint64_t>::max();
  std::array<PhiloxCounter, 4> draws_{};
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

}  // namespace adamant::kernels::cpu
