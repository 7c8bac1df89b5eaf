#pragma once
// The scratch the GPU's flash attention backward takes (kernels/flash_attention.h): the row
// statistics its passes share, 16 bytes a (sample, position, head), which it needs; and the
// score-gradient scratch it can take: the key pass stores every tile of score gradients on or
// below the diagonal (bf16, kFlashScoreTileRows squared a tile, per sample and head) and the
// query pass reads them instead of recomputing the scores, their softmax and dropout. Plain
// C++ without the library's headers, so that the CUDA sources size them as the callers do.
#include <cstddef>
#include <cstdint>

namespace adamant::kernels {

inline constexpr std::int64_t kFlashScoreTileRows = 64;
inline constexpr std::int64_t kFlashStatisticsRowBytes = 16;

// Bytes of the row statistics for `batch` samples of `heads` heads and `seq` tokens.
constexpr std::size_t flash_attention_statistics_bytes(std::int64_t batch, std::int64_t heads, std::int64_t seq) {
  return static_cast<std::size_t>(batch * heads * seq * kFlashStatisticsRowBytes);
}

// Bytes of the scratch for `batch` samples of `heads` heads and `seq` tokens.
constexpr std::size_t flash_attention_scores_bytes(std::int64_t batch, std::int64_t heads, std::int64_t seq) {
  const std::int64_t tiles = (seq + kFlashScoreTileRows - 1) / kFlashScoreTileRows;
  return static_cast<std::size_t>(batch * heads * (tiles * (tiles + 1) / 2) * kFlashScoreTileRows *
                                  kFlashScoreTileRows * 2);
}

}  // namespace adamant::kernels
