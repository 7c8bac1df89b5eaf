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

// Bytes of the scratch for `batch` samples of `heads` heads and `seq` tokens.
constexpr std::size_t flash_attention_scores_bytes(std::int64_t batch, std::int64_t heads, std::int64_t seq) {
  const std::int64_t tiles = (seq + kFlashScoreTileRows - 1) / kFlashScoreTileRows;
  return static_cast<std::size_t>(batch * heads * (tiles * (tiles + 1) / 2) * kFlashScoreTileRows *
                                  kFlashScoreTileRows * 2);
}

}  // namespace adamant::kernels
