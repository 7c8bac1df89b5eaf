#pragma once
// The forward kernel's causal mask and online softmax over the scores one thread holds
// of its warp's 16 query rows (rows `group` and `group + 8`, as mma.sync m16n8 C tiles:
// flash_attention_tiles.cuh). Only for *.cu files.
#include <cuda_runtime.h>

#include <cmath>

#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_detail {

// Scores of keys after their query become -inf: keys first_key + 8 t + 2 pair + {0, 1}
// of n8 tile t against query rows[0] (elements 0, 1) and rows[1] (elements 2, 3).
template <int kKeyTiles>
__device__ __forceinline__ void mask_future_keys(float (&scores)[kKeyTiles][4], int first_key, const int (&rows)[2],
                                                 int pair) {
#pragma unroll
  for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = first_key + 8 * t + 2 * pair + (e & 1);
      if (key > rows[e >> 1]) scores[t][e] = -INFINITY;
    }
  }
}

// Running row maximum of the raw scores q.k (the scale lives in the exponent) and this
// thread's share of the denominator (summed over the four lanes of a row at the end).
class OnlineSoftmax {
 public:
  // Turns one tile of raw scores into probabilities relative to the running maximum
  // and adds them to the denominator. Returns true (the same in every lane of the warp)
  // when the maximum moved: then rescale_output must scale the output accumulators, once
  // the product writing them is done. Every row must see at least one unmasked key of the
  // tile, so that its maximum is finite; the kernel only visits tiles that start at or
  // before its rows.
  template <int kKeyTiles>
  __device__ __forceinline__ bool exponentiate(float (&scores)[kKeyTiles][4], float scale_log2) {
    // Trees keep the dependent chains short.
    float tile_max[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m[kKeyTiles];
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) m[t] = fmaxf(scores[t][2 * h], scores[t][2 * h + 1]);
#pragma unroll
      for (int width = kKeyTiles / 2; width > 0; width /= 2) {
#pragma unroll
        for (int i = 0; i < width; ++i) m[i] = fmaxf(m[i], m[i + width]);
      }
      tile_max[h] = fmaxf(m[0], __shfl_xor_sync(0xffffffffu, m[0], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    }
    // The running maximum moves only when some row of the warp outgrows it by more
    // than 2^kStaleMaxLog2 in probability: below that, probabilities relative to a
    // stale maximum are as exact (fp32 sums, bf16 operands) and the output and
    // denominator need no rescaling. The first tile always moves it from -inf.
    bool grows = false;
#pragma unroll
    for (int h = 0; h < 2; ++h) grows |= (tile_max[h] - row_max_[h]) * scale_log2 > kStaleMaxLog2;
    const bool moves = __any_sync(0xffffffffu, grows);
    if (moves) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float new_max = fmaxf(row_max_[h], tile_max[h]);
        rescale_[h] = fast_exp2((row_max_[h] - new_max) * scale_log2);  // 0 on the first tile
        row_max_[h] = new_max;
        row_sum_[h] *= rescale_[h];
      }
    }
    const float max_scaled[2] = {row_max_[0] * scale_log2, row_max_[1] * scale_log2};
    float sums[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = fast_exp2(fmaf(scores[t][e], scale_log2, -max_scaled[e >> 1]));
        sums[e >> 1][t & 1] += p;
        scores[t][e] = p;
      }
    }
    row_sum_[0] += sums[0][0] + sums[0][1];
    row_sum_[1] += sums[1][0] + sums[1][1];
    return moves;
  }

  // Scales the output accumulators by the factors of the last exponentiate that moved the maximum.
  template <int kOutTiles>
  __device__ __forceinline__ void rescale_output(float (&out)[kOutTiles][4]) const {
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      out[n][0] *= rescale_[0];
      out[n][1] *= rescale_[0];
      out[n][2] *= rescale_[1];
      out[n][3] *= rescale_[1];
    }
  }

  // The whole denominator of row h (0: `group`, 1: `group + 8`); every lane of the warp calls it.
  __device__ __forceinline__ float total(int h) const {
    float sum = row_sum_[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    return sum;
  }

  // Writes rows[h]'s log(sum_j exp(s_j / sqrt(d))) = (max * scale_log2 + log2(sum)) * ln 2
  // into logsumexp[rows[h]] (one lane of the four that share a row; rows past seq are
  // not written), given the rows' whole denominators (total).
  __device__ __forceinline__ void write_logsumexp(float* logsumexp, const int (&rows)[2], const float (&totals)[2],
                                                  int seq, int pair, float scale_log2) const {
    if (pair != 0) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (rows[h] < seq) logsumexp[rows[h]] = (row_max_[h] * scale_log2 + log2f(totals[h])) * kLn2;
    }
  }

 private:
  static constexpr float kStaleMaxLog2 = 8.0f;
  float row_max_[2] = {-INFINITY, -INFINITY};
  float row_sum_[2] = {0.0f, 0.0f};
  float rescale_[2] = {1.0f, 1.0f};
};

}  // namespace adamant::kernels::cuda::flash_detail
