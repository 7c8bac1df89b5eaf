#pragma once
// What every flash attention kernel block knows about itself: its (sample, head), this
// thread's place in the block, where the head's rows lie in qkv and in the [token, head,
// head_dim] arrays, and the per-row statistics the backward's query pass makes. Only for
// *.cu files.
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
// or 192 for a block of three warpgroups), and a block's linear index (x fastest) is the order
// it starts in: every order below runs the row blocks with the most tiles under the causal mask
// (the key pass's first keys, the other passes' last queries) before the others.
struct BlockOrder {
  int slot;      // among the launch's slots (Problem::first_slot on): the score scratch's too
  int heaviest;  // 0 for the slot's row block with the most tiles, up to gridDim.y - 1
};

// The grid's own order, each row block of every slot before the next lighter one: the
// forward and the recomputing passes, which are bound by their instructions.
__device__ __forceinline__ BlockOrder launch_order() {
  return {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y)};
}

// The slots kSlotGroup at a time, the heaviest row blocks first within each group: the passes
// that store and read the score gradients. The blocks running at once then share a few heads,
// whose streamed tiles each block re-reads stay in L2 beside the score gradients passing
// through: in launch order all 96 heads of GPT-3 126M's micro-batch ran at once, and the key
// pass hit L2 on 61% of its accesses (85% grouped) and the query pass read 20% more from
// memory than its score gradients. Not for the other passes: their blocks are bound by
// instructions, and the groups' later heavy blocks lengthen the tail (the forward took 3-7%
// longer grouped).
constexpr int kSlotGroup = 16;

__device__ __forceinline__ BlockOrder head_grouped_order() {
  const int slots = static_cast<int>(gridDim.x), row_blocks = static_cast<int>(gridDim.y);
  const int linear = static_cast<int>(blockIdx.x) + static_cast<int>(blockIdx.y) * slots;
  const int group_first = linear / (kSlotGroup * row_blocks) * kSlotGroup;
  const int group_slots = min(kSlotGroup, slots - group_first);  // the last group may be short
  const int within = linear - group_first * row_blocks;
  return {group_first + within % group_slots, within / group_slots};
}

// The first row of a block of kRows rows whose most tiles lie under its last rows (the forward
// and the query passes).
template <int kRows = kBlockRows>
__device__ __forceinline__ int first_row_longest_first(const BlockOrder& order) {
  return (static_cast<int>(gridDim.y) - 1 - order.heaviest) * kRows;
}

template <int kHeadDim>
struct BlockPlace {
  __device__ BlockPlace(const flash_attention_launchers::Problem& problem, int slot)
      : seq(problem.seq),
        sample((problem.first_slot + slot) / problem.heads),
        head((problem.first_slot + slot) % problem.heads),
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
  // The head's record of `position` in the backward's statistics ([token, head] records).
  __device__ float4* statistics(float* records, int position) const {
    return reinterpret_cast<float4*>(records) + (sample_token + position) * heads() + head;
  }
  // The head's row of the sample in a [batch, heads, seq] array (the logsumexp).
  template <typename T>
  __device__ T* head_row_of(T* array) const {
    return array + (static_cast<std::int64_t>(sample) * heads() + head) * seq;
  }
  __device__ std::int64_t heads() const { return channels / kHeadDim; }
  // Where the warp whose 16 rows start at `first_row` puts its column sums of the head's
  // columns of d_qkv part `part` (0: q, 1: k, 2: v) in the QKV bias gradient's partial sums
  // (BackwardOperands::bias_partials); null without them or past seq (a row tile that does not exist).
  __device__ float* bias_partials(float* partials, int part, int first_row) const {
    static_assert(kWarpRows == flash_attention_launchers::kBiasPartialRows, "a partial-sum row is a warp's rows");
    if (partials == nullptr || first_row >= seq) return nullptr;
    const std::int64_t tile =
        static_cast<std::int64_t>(sample) * ((seq + kWarpRows - 1) / kWarpRows) + first_row / kWarpRows;
    return partials + tile * token_stride + part * channels + static_cast<std::int64_t>(head) * kHeadDim;
  }

  int seq, sample, head;
  int warp, lane, group, pair;  // lane = 4 group + pair
  std::int64_t channels, token_stride, sample_token;
};

// The statistics of this thread's two rows (group and group + 8 of the warp starting at
// warp_first; zero past seq), made from out, d_out and the logsumexp: each of a row's four
// lanes (pair 0..3) sums the terms of every fourth 16-byte chunk, and every lane then adds
// the chunks' sums in chunk order, as the statistics kernel does (chunk_dot), so both give
// the same bits. Lane pair 0 writes each row's record for the key pass. Every lane of the
// warp makes it (the sums cross lanes).
template <int kHeadDim>
struct RowStatistics {
  __device__ RowStatistics(const BlockPlace<kHeadDim>& place,
                           const flash_attention_launchers::BackwardOperands& operands, int warp_first,
                           float inverse_keep) {
    constexpr int kChunks = kHeadDim / kChunk;
    constexpr int kLaneChunks = (kChunks + 3) / 4;
    const std::uint16_t* out = place.rows_of(operands.out);
    const std::uint16_t* d_out = place.rows_of(operands.d_out);
    const float* logsumexp = place.head_row_of(operands.logsumexp);
    float sums[2][kLaneChunks];
    float lse[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_first + place.group + 8 * h;
      const bool inside = row < place.seq;
      lse[h] = inside ? logsumexp[row] : 0.0f;
#pragma unroll
      for (int k = 0; k < kLaneChunks; ++k) {
        const int chunk = place.pair + 4 * k;
        sums[h][k] = 0.0f;
        if (inside && chunk < kChunks) {
          const std::int64_t offset = static_cast<std::int64_t>(row) * place.channels + chunk * kChunk;
          sums[h][k] = chunk_dot(__ldg(reinterpret_cast<const uint4*>(out + offset)),
                                 __ldg(reinterpret_cast<const uint4*>(d_out + offset)));
        }
      }
    }
    const int quad = place.lane & ~3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp_first + place.group + 8 * h;
      float total = 0.0f;
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk)
        total += __shfl_sync(0xffffffffu, sums[h][chunk / 4], quad | (chunk % 4));
      d_values[h] = lse_log2[h] = 0.0f;
      if (row < place.seq) {
        const float4 record = statistics_record(total, lse[h], inverse_keep);
        d_values[h] = record.x;
        lse_log2[h] = record.y;
        if (place.pair == 0) *place.statistics(operands.statistics, row) = record;
      }
    }
  }
  float d_values[2];
  float lse_log2[2];
};

}  // namespace adamant::kernels::cuda::flash_detail
