#pragma once
// The score-gradient scratch the GPU's flash attention backward can take
// (kernels/flash_attention.h): the key pass stores every tile of score gradients on or
// below the diagonal (bf16, kFlashScoreTileRows squared a tile, per sample and head) and the
// query pass reads them instead of recomputing the scores, their softmax and dropout. Plain
// C++ without the library's headers, so that the CUDA sources size it as the callers do.
#include <cstddef>
#include <cstdint>

namespace adamant::kernels {

inline constexpr std::int64_t kFlashScoreTileRows = 64;

// Whether flash_attention_backward takes a given scratch at this head size (64 and 128);
// at the others it recomputes, so a caller that sizes memory holds none for them. The
// CUDA passes have a stored-scores form for every head size, which flash_attention_bench
// times at all four, but the library hands a scratch on only where the GPU tests check
// that form against the CPU reference (tests/kernels/cuda_flash_attention_test.cpp).
constexpr bool flash_attention_takes_scores(std::int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

// Bytes of the scratch for `batch` samples of `heads` heads and `seq` tokens.
constexpr std::size_t flash_attention_scores_bytes(std::int64_t batch, std::int64_t heads, std::int64_t seq) {
  const std::int64_t tiles = (seq + kFlashScoreTileRows - 1) / kFlashScoreTileRows;
  return static_cast<std::size_t>(batch * heads * (tiles * (tiles + 1) / 2) * kFlashScoreTileRows *
                                  kFlashScoreTileRows * 2);
}

}  // namespace adamant::kernels
