// Softmax cross-entropy over the vocabulary or a tensor-parallel slice of it (one
// block per row, online max and sum in one pass; for a slice, its statistics, or its
// gradient from the whole vocabulary's log-sum-exp; the loss with its gradient from a
// copy of the row in the shared memory of a cluster of two blocks where it fits), the
// combination of the slices' statistics. The logits are fp32 or bf16, read in 16-byte
// groups and reduced in fp32 either way. Launchers declared in classifier_launchers.h.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/async_copy.cuh"
#include "adamant/kernels/cuda/classifier_launchers.h"
#include "adamant/kernels/cuda/device_common.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

// ---- softmax cross-entropy ----

// 1024 threads: a 50304-wide row is 12576 float4 groups, about 12 per thread, and
// rows are few per chunk, so each block should cover a row with as many loads in
// flight as possible.
constexpr int kRowThreads = 1024;

// exp(x - max) is computed as 2^(x log2(e) - max log2(e)): one fused multiply-add and the
// special function unit's 2^x (relative error about 2^-22), where expf takes about ten
// instructions. With eight bf16 logits in a 16-byte group, exponentials are most of a
// row's instructions, and the row kernels would otherwise wait on issue, not on memory.
constexpr float kLog2e = 1.4426950408889634f;

// -max log2(e), the shift every exponential of a row against `max` takes.
__device__ __forceinline__ float neg_scaled(float max) { return -max * kLog2e; }
// exp(x - max), given neg_scaled(max).
__device__ __forceinline__ float exp_shifted(float x, float neg_scaled_max) {
  return detail::fast_exp2(fmaf(x, kLog2e, neg_scaled_max));
}

// Running softmax statistics: the max seen so far and the sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return a;  // both empty: exp(-inf - -inf) would be NaN
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// Adds a group's values with one rescale of the running sum, their exponentials summed
// pairwise ((e0 + e1) + (e2 + e3), ...).
template <int kValues>
__device__ __forceinline__ void accumulate_group(MaxSum& state, const float (&x)[kValues]) {
  float local = x[0];
#pragma unroll
  for (int k = 1; k < kValues; ++k) local = fmaxf(local, x[k]);
  if (local > state.max) {
    state.sum *= expf(state.max - local);  // 0 * exp(-inf) = 0 on the first values
    state.max = local;
  }
  const float neg_scaled_max = neg_scaled(state.max);
  float e[kValues];
#pragma unroll
  for (int k = 0; k < kValues; ++k) e[k] = exp_shifted(x[k], neg_scaled_max);
#pragma unroll
  for (int width = 1; width < kValues; width *= 2) {
#pragma unroll
    for (int k = 0; k + width < kValues; k += 2 * width) e[k] += e[k + width];
  }
  state.sum += e[0];
}

__device__ __forceinline__ void accumulate1(MaxSum& state, float x) {
  if (x > state.max) {
    state.sum *= expf(state.max - x);
    state.max = x;
  }
  state.sum += exp_shifted(x, neg_scaled(state.max));
}

__device__ __forceinline__ MaxSum warp_reduce(MaxSum value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_down_sync(0xffffffffu, value.max, offset),
                       __shfl_down_sync(0xffffffffu, value.sum, offset)};
    value = combine(value, other);
  }
  return value;
}

// The block's total in a fixed order, returned to every thread of a kThreads-thread block.
template <int kThreads = kRowThreads>
__device__ MaxSum block_reduce(MaxSum value) {
  constexpr int kRowWarps = kThreads / 32;
  static_assert(kRowWarps <= 32, "one warp adds the warps' totals");
  __shared__ MaxSum warp_totals[kRowWarps];
  __shared__ MaxSum total;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  value = warp_reduce(value);
  if (lane == 0) warp_totals[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kRowWarps ? warp_totals[lane] : MaxSum{-INFINITY, 0.0f};
    value = warp_reduce(value);
    if (lane == 0) total = value;
  }
  __syncthreads();
  return total;
}

// grad_scale * (softmax - onehot) of one element, as the CPU reference: e * (scale / sum) - scale at the target.
__device__ __forceinline__ float gradient_of(float x, std::int64_t index, MaxSum stats, float factor, float grad_scale,
                                             std::int64_t target) {
  const float g = exp_shifted(x, neg_scaled(stats.max)) * factor;
  return index == target ? g - grad_scale : g;
}

// The same for a group of values in place: e * factor, then - grad_scale at `lane` when the
// group holds the target (one comparison a group instead of one a value).
template <int kValues>
__device__ __forceinline__ void group_gradient(float (&v)[kValues], float neg_scaled_max, float factor,
                                               bool holds_target, int lane, float grad_scale) {
#pragma unroll
  for (int k = 0; k < kValues; ++k) v[k] = exp_shifted(v[k], neg_scaled_max) * factor;
  if (holds_target) {
#pragma unroll
    for (int k = 0; k < kValues; ++k) v[k] = k == lane ? v[k] - grad_scale : v[k];
  }
}

// 16 bytes of a row's logits: four fp32 or eight bf16 values, unpacked to fp32.
template <DType kLogits>
struct LogitGroup;
template <>
struct LogitGroup<DType::f32> {
  static constexpr int kValues = 4;
  __device__ static void unpack(uint4 bits, float (&v)[kValues]) {
    v[0] = __uint_as_float(bits.x);
    v[1] = __uint_as_float(bits.y);
    v[2] = __uint_as_float(bits.z);
    v[3] = __uint_as_float(bits.w);
  }
  __device__ static float at(const void* row, std::int64_t i) { return static_cast<const float*>(row)[i]; }
};
template <>
struct LogitGroup<DType::bf16> {
  static constexpr int kValues = 8;
  __device__ static void unpack(uint4 bits, float (&v)[kValues]) {
    const std::uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // the lower half of a word is the earlier element
      v[2 * k] = __uint_as_float(words[k] << 16);
      v[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
    }
  }
  __device__ static float at(const void* row, std::int64_t i) {
    return detail::bf16_bits_to_f32(static_cast<const std::uint16_t*>(row)[i]);
  }
};

// values[lane] without a dynamically indexed register array.
template <int kValues>
__device__ __forceinline__ float value_at(const float (&values)[kValues], int lane) {
  float picked = values[0];
#pragma unroll
  for (int k = 1; k < kValues; ++k) picked = k == lane ? values[k] : picked;
  return picked;
}

// A group's gradient, rounded to bf16, at bf16 element `first` of `out` (8 or 16 bytes).
template <int kValues>
__device__ __forceinline__ void store_bf16_group(std::uint16_t* out, std::int64_t first, const float (&g)[kValues]) {
  if constexpr (kValues == 4) {
    *reinterpret_cast<uint2*>(out + first) = make_uint2(detail::pack_bf16(g[0], g[1]), detail::pack_bf16(g[2], g[3]));
  } else {
    static_assert(kValues == 8);
    *reinterpret_cast<uint4*>(out + first) = make_uint4(detail::pack_bf16(g[0], g[1]), detail::pack_bf16(g[2], g[3]),
                                                        detail::pack_bf16(g[4], g[5]), detail::pack_bf16(g[6], g[7]));
  }
}

// What the row kernel reduces a row to before its gradient pass.
enum class RowReduction : std::uint8_t {
  loss,         // losses[r] = logsumexp - the target's logit; NaN when the target is outside the row
  slice_stats,  // slice_lse[r] = logsumexp, target_logit[r] = the target's logit, 0 outside the row
  given_lse,    // none: the gradient takes lse[r], the whole vocabulary's, as its max with a sum of 1
};

// One launch's operands. The row holds columns [vocab_start, vocab_start + vocab) of the
// vocabulary that targets index; the pointers a mode does not use may be null.
struct RowOperands {
  void* logits;  // fp32 or bf16, as the kernel's kLogits
  const std::int32_t* targets;
  std::int64_t vocab;
  std::int64_t vocab_start;
  float grad_scale;
  float* losses;
  float* slice_lse;
  float* target_logit;
  const float* lse;
};

template <DType kLogits, bool kVectorized, RowReduction kReduction, CrossEntropyGradient kGradient>
__global__ void __launch_bounds__(kRowThreads) cross_entropy_rows_kernel(RowOperands operands) {
  using Group = LogitGroup<kLogits>;
  constexpr int kValues = Group::kValues;
  static_assert(kLogits == DType::f32 || kGradient != CrossEntropyGradient::f32_in_place,
                "bf16 logits take their gradient in bf16");
  const std::int64_t row = blockIdx.x;
  const std::int64_t vocab = operands.vocab;
  const float grad_scale = operands.grad_scale;
  constexpr std::int64_t kLogitBytes = 16 / kValues;
  char* row_logits = static_cast<char*>(operands.logits) + row * vocab * kLogitBytes;
  const std::int64_t target = static_cast<std::int64_t>(operands.targets[row]) - operands.vocab_start;
  const bool target_in_row = target >= 0 && target < vocab;
  const std::int64_t one_hot_index = target_in_row ? target : -1;
  const std::int64_t groups = vocab / kValues;
  const auto* vectors = reinterpret_cast<const uint4*>(row_logits);

  MaxSum stats{0.0f, 1.0f};
  if constexpr (kReduction == RowReduction::given_lse) {
    stats.max = operands.lse[row];  // exp(x - lse) / 1: the softmax over the whole vocabulary
  } else {
    // Read before block_reduce's barriers; the gradient overwrites the row only after them.
    const float target_logit = threadIdx.x == 0 && target_in_row ? Group::at(row_logits, target) : 0.0f;
    MaxSum state{-INFINITY, 0.0f};
    if constexpr (kVectorized) {
      for (std::int64_t g = threadIdx.x; g < groups; g += kRowThreads) {
        float v[kValues];
        Group::unpack(vectors[g], v);
        accumulate_group(state, v);
      }
    } else {
      for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads) accumulate1(state, Group::at(row_logits, i));
    }
    stats = block_reduce(state);
    if (threadIdx.x == 0) {
      const float row_lse = logf(stats.sum) + stats.max;
      if constexpr (kReduction == RowReduction::loss) {
        operands.losses[row] = target_in_row ? row_lse - target_logit : NAN;
      } else {
        operands.slice_lse[row] = row_lse;
        operands.target_logit[row] = target_logit;
      }
    }
  }
  [[maybe_unused]] const float neg_scaled_max = neg_scaled(stats.max);
  [[maybe_unused]] const std::int64_t target_group = one_hot_index >= 0 ? one_hot_index / kValues : -1;
  [[maybe_unused]] const int target_lane = static_cast<int>(one_hot_index >= 0 ? one_hot_index % kValues : 0);
  if constexpr (kGradient == CrossEntropyGradient::f32_in_place) {
    const float factor = grad_scale / stats.sum;
    auto* row_f32 = reinterpret_cast<float*>(row_logits);
    // Each thread rewrites exactly the elements it reads: no ordering needed.
    if constexpr (kVectorized) {
      for (std::int64_t g = threadIdx.x; g < groups; g += kRowThreads) {
        float v[kValues];
        Group::unpack(vectors[g], v);
        group_gradient(v, neg_scaled_max, factor, g == target_group, target_lane, grad_scale);
        reinterpret_cast<float4*>(row_f32)[g] = make_float4(v[0], v[1], v[2], v[3]);
      }
    } else {
      for (std::int64_t i = threadIdx.x; i < vocab; i += kRowThreads) {
        row_f32[i] = gradient_of(row_f32[i], i, stats, factor, grad_scale, one_hot_index);
      }
    }
  } else if constexpr (kGradient == CrossEntropyGradient::bf16_in_row) {
    const float factor = grad_scale / stats.sum;
    // bf16 element i lands on bytes [2i, 2i + 2) of the row: in place for bf16 logits,
    // inside fp32 element i / 2 for fp32 ones. The row is walked in tiles [t, t + T): all
    // reads of a tile, a barrier, then its writes, which reach logits below (t + T) / 2
    // <= t + T only, all read by then; later tiles read at t + T and beyond, which no
    // write has touched.
    auto* row_gradient = reinterpret_cast<std::uint16_t*>(row_logits);
    if constexpr (kVectorized) {
      for (std::int64_t tile = 0; tile < groups; tile += kRowThreads) {
        const std::int64_t g = tile + threadIdx.x;
        float v[kValues] = {};
        if (g < groups) Group::unpack(vectors[g], v);
        __syncthreads();
        if (g < groups) {
          group_gradient(v, neg_scaled_max, factor, g == target_group, target_lane, grad_scale);
          store_bf16_group(row_gradient, g * kValues, v);
        }
      }
    } else {
      for (std::int64_t tile = 0; tile < vocab; tile += kRowThreads) {
        const std::int64_t i = tile + threadIdx.x;
        const float x = i < vocab ? Group::at(row_logits, i) : 0.0f;
        __syncthreads();
        if (i < vocab) {
          row_gradient[i] = detail::f32_to_bf16_bits(gradient_of(x, i, stats, factor, grad_scale, one_hot_index));
        }
      }
    }
  }
}

// ---- the loss and its gradient from rows staged in shared memory ----
//
// The streamed kernel above reads a row twice, and with two 200 KB rows per
// multiprocessor in flight its second read misses the L2 and goes back to DRAM. Here a
// cluster of two blocks owns a row, each block copying one half of its 16-byte groups
// into shared memory once (cp.async, all of a thread's copies in flight at once), so
// that a row is read from DRAM once. Blocks of different rows share each multiprocessor,
// so one block's reduction and exponentials overlap the others' copies: two of 512
// threads, or where four half rows fit in its shared memory (bf16 logits of up to 54K),
// four of 256, which keeps twice the bytes in flight.
// The clusters are persistent and walk rows c, c + clusters, ...; after writing a
// group's gradient, a thread at once starts copying the same group of its next row into
// the same slot (no thread reads another's slots, so a slot needs no barrier before its
// next copy), and the next row's reads overlap this row's writes.
// Every thread of both blocks has waited for its copies of a row before the cluster
// barrier that joins the halves' statistics, so the gradient written over the row's
// global storage (bf16_in_row with fp32 logits: over its front half, the first block's)
// never overtakes a copy still reading it.
constexpr int kStagedClusterBlocks = 2;
// Threads of a block of the staged kernel, and how many such blocks a multiprocessor runs
// (1,024 threads in all, at most 64 registers each).
constexpr int kStagedWideThreads = 512;
constexpr int kStagedNarrowThreads = 256;
constexpr int staged_blocks_per_multiprocessor(int threads) { return 1024 / threads; }

// What each block of a cluster publishes for a row: its half's statistics and the
// target's logit where the target falls in its half (else 0).
struct HalfRowStats {
  MaxSum stats;
  float target_logit;
};

template <DType kLogits, CrossEntropyGradient kGradient, int kStagedThreads>
__global__ void __cluster_dims__(kStagedClusterBlocks, 1, 1)
    __launch_bounds__(kStagedThreads, staged_blocks_per_multiprocessor(kStagedThreads))
        cross_entropy_staged_rows_kernel(RowOperands operands, std::int64_t rows) {
  static_assert(kGradient != CrossEntropyGradient::none, "a row read once needs no staging");
  static_assert(kLogits == DType::f32 || kGradient != CrossEntropyGradient::f32_in_place,
                "bf16 logits take their gradient in bf16");
  using Group = LogitGroup<kLogits>;
  constexpr int kValues = Group::kValues;
  namespace cg = cooperative_groups;
  extern __shared__ uint4 staged[];
  // Published by the parity of the row's round: the slot of round i is written again in
  // round i + 2, after the barrier of round i + 1, which every reader of round i has passed.
  __shared__ HalfRowStats published[2];
  const cg::cluster_group cluster = cg::this_cluster();
  const int half = static_cast<int>(cluster.block_rank());
  const std::int64_t vocab = operands.vocab;
  const std::int64_t groups = vocab / kValues;
  const std::int64_t half_groups = (groups + 1) / 2;
  const std::int64_t first_group = half * half_groups;
  const std::int64_t end_group = half == 0 ? half_groups : groups;
  const float grad_scale = operands.grad_scale;
  const std::int64_t clusters = gridDim.x / kStagedClusterBlocks;
  const std::int64_t first_row = blockIdx.x / kStagedClusterBlocks;
  // A row of `groups` 16-byte groups, in fp32 or bf16.
  const auto row_groups = [&](std::int64_t row) { return static_cast<uint4*>(operands.logits) + row * groups; };

  auto copy_row = [&](std::int64_t row) {
    const uint4* source = row_groups(row);
    for (std::int64_t g = first_group + threadIdx.x; g < end_group; g += kStagedThreads) {
      detail::copy_async_16(staged + (g - first_group), source + g, true);
    }
    detail::commit_copies();
  };
  if (first_row < rows) copy_row(first_row);
  int parity = 0;
  for (std::int64_t row = first_row; row < rows; row += clusters, parity ^= 1) {
    const std::int64_t target = operands.targets[row];
    const bool target_in_row = target >= 0 && target < vocab;
    const std::int64_t target_group = target_in_row ? target / kValues : -1;
    detail::wait_copies<0>();

    MaxSum state{-INFINITY, 0.0f};
    for (std::int64_t g = first_group + threadIdx.x; g < end_group; g += kStagedThreads) {
      float v[kValues];
      Group::unpack(staged[g - first_group], v);
      accumulate_group(state, v);
      if (g == target_group) published[parity].target_logit = value_at(v, static_cast<int>(target % kValues));
    }
    const MaxSum half_stats = block_reduce<kStagedThreads>(state);
    if (threadIdx.x == 0) {
      published[parity].stats = half_stats;
      const bool target_here = target_group >= first_group && target_group < end_group;
      if (!target_here) published[parity].target_logit = 0.0f;
    }
    cluster.sync();  // both halves published (release, acquire); every copy of the row has landed
    const HalfRowStats front = *cluster.map_shared_rank(&published[parity], 0);
    const HalfRowStats back = *cluster.map_shared_rank(&published[parity], 1);
    const MaxSum stats = combine(front.stats, back.stats);
    if (half == 0 && threadIdx.x == 0) {
      operands.losses[row] =
          target_in_row ? logf(stats.sum) + stats.max - (front.target_logit + back.target_logit) : NAN;
    }

    const float factor = grad_scale / stats.sum;
    const float neg_scaled_max = neg_scaled(stats.max);
    const int target_lane = static_cast<int>(target_in_row ? target % kValues : 0);
    const std::int64_t next = row + clusters;
    void* row_logits = row_groups(row);
    const uint4* next_source = row_groups(next);
    for (std::int64_t g = first_group + threadIdx.x; g < end_group; g += kStagedThreads) {
      float v[kValues];
      Group::unpack(staged[g - first_group], v);
      group_gradient(v, neg_scaled_max, factor, g == target_group, target_lane, grad_scale);
      if constexpr (kGradient == CrossEntropyGradient::f32_in_place) {
        static_cast<float4*>(row_logits)[g] = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        store_bf16_group(static_cast<std::uint16_t*>(row_logits), g * kValues, v);
      }
      if (next < rows) detail::copy_async_16(staged + (g - first_group), next_source + g, true);
    }
    detail::commit_copies();
  }
  cluster.sync();  // neither block leaves while the other may still read its published statistics
}

// Shared memory each block of the staged kernel needs for a row of `vocab`: half the row's
// 16-byte groups (vocab a multiple of the group, 16-byte aligned).
template <DType kLogits>
std::size_t staged_half_row_bytes(std::int64_t vocab) {
  const std::size_t groups = static_cast<std::size_t>(vocab) / LogitGroup<kLogits>::kValues;
  return (groups + 1) / 2 * sizeof(uint4);
}

// Whether `blocks` blocks of `half_row_bytes` fit in a multiprocessor's shared memory, with
// each block's static shared memory and the 1 KB the system reserves per block on top.
bool staged_blocks_fit(std::size_t half_row_bytes, int blocks, int device) {
  int per_multiprocessor = 0;
  if (cudaDeviceGetAttribute(&per_multiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess) {
    return false;
  }
  constexpr std::size_t kPerBlockExtra = 2048;
  return static_cast<std::size_t>(blocks) * (half_row_bytes + kPerBlockExtra) <=
         static_cast<std::size_t>(per_multiprocessor);
}

// The staged kernel of kThreads a block over `rows`: persistent clusters, as many as the
// multiprocessors hold (each holds staged_blocks_per_multiprocessor blocks of two clusters' halves).
template <DType kLogits, CrossEntropyGradient kGradient, int kThreads>
cudaError_t launch_staged_rows(const RowOperands& operands, std::int64_t rows, std::size_t half_row_bytes,
                               int multiprocessors, cudaStream_t stream) {
  const auto kernel = cross_entropy_staged_rows_kernel<kLogits, kGradient, kThreads>;
  const cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(half_row_bytes));
  if (status != cudaSuccess) return status;
  const std::int64_t resident_clusters =
      static_cast<std::int64_t>(multiprocessors) * staged_blocks_per_multiprocessor(kThreads) / kStagedClusterBlocks;
  const std::int64_t clusters = std::min<std::int64_t>(rows, resident_clusters);
  kernel<<<static_cast<unsigned>(clusters * kStagedClusterBlocks), kThreads, half_row_bytes, stream>>>(operands, rows);
  return cudaGetLastError();
}

template <DType kLogits, RowReduction kReduction, CrossEntropyGradient kGradient>
cudaError_t launch_rows(const RowOperands& operands, std::int64_t rows, RowReads reads, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || rows > 0x7fffffff || operands.vocab <= 0) return cudaErrorInvalidValue;
  // 16-byte groups need every row start 16-byte aligned: an aligned base and whole groups a row.
  const bool vectorized =
      operands.vocab % LogitGroup<kLogits>::kValues == 0 && reinterpret_cast<std::uintptr_t>(operands.logits) % 16 == 0;
  if constexpr (kReduction == RowReduction::loss && kGradient != CrossEntropyGradient::none) {
    if (reads == RowReads::once_where_it_fits && vectorized) {
      int device = 0, multiprocessors = 0;
      cudaError_t status = cudaGetDevice(&device);
      if (status != cudaSuccess) return status;
      status = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
      if (status != cudaSuccess) return status;
      const std::size_t bytes = staged_half_row_bytes<kLogits>(operands.vocab);
      if (staged_blocks_fit(bytes, staged_blocks_per_multiprocessor(kStagedNarrowThreads), device)) {
        return launch_staged_rows<kLogits, kGradient, kStagedNarrowThreads>(operands, rows, bytes, multiprocessors,
                                                                            stream);
      }
      if (staged_blocks_fit(bytes, staged_blocks_per_multiprocessor(kStagedWideThreads), device)) {
        return launch_staged_rows<kLogits, kGradient, kStagedWideThreads>(operands, rows, bytes, multiprocessors,
                                                                          stream);
      }
    }
  }
  const dim3 grid(static_cast<unsigned>(rows));
  if (vectorized) {
    cross_entropy_rows_kernel<kLogits, true, kReduction, kGradient><<<grid, kRowThreads, 0, stream>>>(operands);
  } else {
    cross_entropy_rows_kernel<kLogits, false, kReduction, kGradient><<<grid, kRowThreads, 0, stream>>>(operands);
  }
  return cudaGetLastError();
}

// The launch for the logits' dtype: fp32, or bf16 with a bf16 gradient (or none).
template <RowReduction kReduction, CrossEntropyGradient kGradient>
cudaError_t launch_rows_of(DType logits_dtype, const RowOperands& operands, std::int64_t rows, RowReads reads,
                           cudaStream_t stream) {
  if (logits_dtype == DType::f32) return launch_rows<DType::f32, kReduction, kGradient>(operands, rows, reads, stream);
  if constexpr (kGradient != CrossEntropyGradient::f32_in_place) {
    if (logits_dtype == DType::bf16) {
      return launch_rows<DType::bf16, kReduction, kGradient>(operands, rows, reads, stream);
    }
  }
  return cudaErrorInvalidValue;
}

// ---- combining the ranks' statistics ----

constexpr int kCombineThreads = 256;

// One thread per row, the ranks in order (as the CPU reference).
__global__ void __launch_bounds__(kCombineThreads)
    vocab_parallel_combine_kernel(const float* gathered, int tp_size, std::int64_t rows, float* losses, float* lse) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kCombineThreads + threadIdx.x;
  if (row >= rows) return;
  float row_max = -INFINITY;
  for (int t = 0; t < tp_size; ++t) row_max = fmaxf(row_max, gathered[2 * t * rows + row]);
  float sum = 0.0f, target_logit = 0.0f;
  for (int t = 0; t < tp_size; ++t) {
    sum += expf(gathered[2 * t * rows + row] - row_max);
    target_logit += gathered[(2 * t + 1) * rows + row];
  }
  const float row_lse = logf(sum) + row_max;
  lse[row] = row_lse;
  losses[row] = row_lse - target_logit;
}

}  // namespace

cudaError_t softmax_cross_entropy(void* logits, DType logits_dtype, const std::int32_t* targets, float* losses,
                                  std::int64_t rows, std::int64_t vocab, CrossEntropyGradient gradient,
                                  float grad_scale, cudaStream_t stream, RowReads reads) {
  const RowOperands operands{logits, targets, vocab, 0, grad_scale, losses, nullptr, nullptr, nullptr};
  switch (gradient) {
    case CrossEntropyGradient::none:
      return launch_rows_of<RowReduction::loss, CrossEntropyGradient::none>(logits_dtype, operands, rows, reads,
                                                                            stream);
    case CrossEntropyGradient::f32_in_place:
      return launch_rows_of<RowReduction::loss, CrossEntropyGradient::f32_in_place>(logits_dtype, operands, rows, reads,
                                                                                    stream);
    case CrossEntropyGradient::bf16_in_row:
      return launch_rows_of<RowReduction::loss, CrossEntropyGradient::bf16_in_row>(logits_dtype, operands, rows, reads,
                                                                                   stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t vocab_slice_statistics(void* logits, DType logits_dtype, const std::int32_t* targets,
                                   std::int64_t vocab_start, float* slice_lse, float* target_logit, std::int64_t rows,
                                   std::int64_t vocab, cudaStream_t stream) {
  const RowOperands operands{logits, targets, vocab, vocab_start, 1.0f, nullptr, slice_lse, target_logit, nullptr};
  return launch_rows_of<RowReduction::slice_stats, CrossEntropyGradient::none>(logits_dtype, operands, rows,
                                                                               RowReads::once_where_it_fits, stream);
}

cudaError_t vocab_slice_gradient(void* logits, DType logits_dtype, const std::int32_t* targets,
                                 std::int64_t vocab_start, const float* lse, std::int64_t rows, std::int64_t vocab,
                                 CrossEntropyGradient gradient, float grad_scale, cudaStream_t stream) {
  const RowOperands operands{logits, targets, vocab, vocab_start, grad_scale, nullptr, nullptr, nullptr, lse};
  switch (gradient) {
    case CrossEntropyGradient::f32_in_place:
      return launch_rows_of<RowReduction::given_lse, CrossEntropyGradient::f32_in_place>(
          logits_dtype, operands, rows, RowReads::once_where_it_fits, stream);
    case CrossEntropyGradient::bf16_in_row:
      return launch_rows_of<RowReduction::given_lse, CrossEntropyGradient::bf16_in_row>(
          logits_dtype, operands, rows, RowReads::once_where_it_fits, stream);
    case CrossEntropyGradient::none:
      break;  // nothing to compute
  }
  return cudaErrorInvalidValue;
}

cudaError_t vocab_parallel_combine(const float* gathered, int tp_size, std::int64_t rows, float* losses, float* lse,
                                   cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || tp_size <= 0) return cudaErrorInvalidValue;
  const std::int64_t blocks = (rows + kCombineThreads - 1) / kCombineThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  vocab_parallel_combine_kernel<<<static_cast<unsigned>(blocks), kCombineThreads, 0, stream>>>(gathered, tp_size, rows,
                                                                                               losses, lse);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::launchers
