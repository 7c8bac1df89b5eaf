#pragma once
// What every flash attention kernel block knows about itself: its (sample, head), this
// thread's place in the block, where the head's rows lie in qkv and in the [token, head,
// head_dim] arrays, and the per-row statistics the backward passes share. Only for *.cu
// files.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_detail {

// f(std::true_type) where a tile needs its positions compared (causal mask, rows past
// the sequence), else f(std::false_type): two copies of the tile's element loop, so that
// the tiles off the diagonal run without the comparisons, which cost more instructions
// than the exponentials they guard.
template <typename F>
__device__ __forceinline__ void with_masking(bool masked, F&& f) {
  if (masked) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

// The grid is (the launch's (sample, head) slots, row blocks of the kernel's rows: kBlockRows,
// or 192 for a block of three warpgroups): blockIdx.x is the slot's place among them
// (Problem::first_slot).
template <int kHeadDim>
struct BlockPlace {
  __device__ explicit BlockPlace(const flash_attention_launchers::Problem& problem)
      : seq(problem.seq),
        sample((problem.first_slot + static_cast<int>(blockIdx.x)) / problem.heads),
        head((problem.first_slot + static_cast<int>(blockIdx.x)) % problem.heads),
        warp(static_cast<int>(threadIdx.x) / kWarpSize),
        lane(static_cast<int>(threadIdx.x) % kWarpSize),
        group(lane / 4),
        pair(lane % 4),
        channels(static_cast<std::int64_t>(problem.heads) * kHeadDim),
        token_stride(3 * channels),
        sample_token(static_cast<std::int64_t>(sample) * seq) {}

  // The head's q of the sample's first token in qkv [batch, seq, 3, heads, head_dim];
  // its k and v are channels and 2 channels further, rows token_stride apart.
  __device__ const std::uint16_t* q(const std::uint16_t* qkv) const {
    return qkv + sample_token * token_stride + static_cast<std::int64_t>(head) * kHeadDim;
  }
  // The head's row of the sample's first token in a [batch, seq, heads, head_dim] array
  // (out, d_out); rows channels apart.
  template <typename T>
  __device__ T* rows_of(T* array) const {
    return array + sample_token * channels + static_cast<std::int64_t>(head) * kHeadDim;
  }
  // The two fp32 statistics (D, logsumexp log2 e) of `position` (flash_attention_tiles.cuh).
  __device__ float* statistics(std::uint16_t* d_qkv, int position) const {
    return row_statistics_slot(d_qkv, sample_token + position, token_stride, head, kHeadDim);
  }

  int seq, sample, head;
  int warp, lane, group, pair;  // lane = 4 group + pair
  std::int64_t channels, token_stride, sample_token;
};

// The first row of a block of kRows rows whose grid's y runs over row blocks with the
// longest rows (the most key tiles under the causal mask) first: the forward and the query
// pass.
template <int kRows = kBlockRows>
__device__ __forceinline__ int first_row_longest_first() {
  return static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;
}

// The statistics of this thread's two rows (group and group + 8 of the warp starting
// at warp_first); zero past seq.
template <int kHeadDim>
struct RowStatistics {
  __device__ RowStatistics(const BlockPlace<kHeadDim>& place, std::uint16_t* d_qkv, int warp_first) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_first + place.group + 8 * h;
      d_values[h] = lse_log2[h] = 0.0f;
      if (row < place.seq) {
        const float2 stats = *reinterpret_cast<const float2*>(place.statistics(d_qkv, row));
        d_values[h] = stats.x;
        lse_log2[h] = stats.y;
      }
    }
  }
  float d_values[2];
  float lse_log2[2];
};

}  // namespace adamant::kernels::cuda::flash_detail
