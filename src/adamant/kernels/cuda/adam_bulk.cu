// Adam with store_param_remainders (kernels/adam.h) on a few SMs, its operands moved by bulk
// copies (cp.async.bulk): for an update that runs beside other kernels (the next forward's
// GEMMs) on the SMs they leave it. A bulk copy keeps a whole chunk in flight for one
// instruction; the copies alone move about 106 GB/s an SM on an H100, but with the update's
// arithmetic an SM moves about 50 GB/s, bound by its instructions (BENCHMARKS.md).
//
// The shard is cut into chunks of kChunk elements, chunk c to block c % grid. One thread of a
// block copies a chunk of each operand (gradient, bf16 weight, remainder, both moments) into
// one of kStages shared-memory stages and, once the block has updated it there, the four
// updated ones back. A stage is refilled one chunk later, once its copies back have surely read
// it, so that the thread never waits on the copies it has just issued. The block walks the
// segments that overlap a chunk together (adam.cu's walk, a cached load per chunk inside a
// large segment); within each overlap a thread updates its groups of 4 elements, all 4 lanes at
// once where the group lies inside it. An element outside every segment (padding) keeps its
// loaded value, which is written back unchanged. The last numel % kChunk elements are updated
// by block 0 from global memory. The arithmetic is adam.cu's (adam_update.cuh), so the bits are
// the CPU reference's.
#include <cstdint>

#include "adamant/kernels/cuda/adam_update.cuh"
#include "adamant/kernels/cuda/device_common.cuh"
#include "adamant/kernels/cuda/launchers.h"
#include "adamant/kernels/cuda/tensor_copy.cuh"

namespace adamant::kernels::cuda::launchers {

namespace {

// The update is bound by its instructions (about 87 an element: three IEEE divisions, a square
// root, the remainder split; ncu puts 16 SMs at 70% of their issue slots), so a block is as many
// warps as an SM holds: on an H100, 16 SMs move 0.81 TB/s with 1024 threads, 0.59 with 512 and
// 0.43 with 256 (BENCHMARKS.md). The compile-time overrides let the benchmark compare geometries
// without touching the code.
#ifndef ADAMANT_ADAM_BULK_THREADS
#define ADAMANT_ADAM_BULK_THREADS 1024
#endif
#ifndef ADAMANT_ADAM_BULK_CHUNK
#define ADAMANT_ADAM_BULK_CHUNK 4096
#endif
#ifndef ADAMANT_ADAM_BULK_STAGES
#define ADAMANT_ADAM_BULK_STAGES 3
#endif
constexpr int kThreads = ADAMANT_ADAM_BULK_THREADS;
constexpr int kChunk = ADAMANT_ADAM_BULK_CHUNK;  // elements
constexpr int kStages = ADAMANT_ADAM_BULK_STAGES;
constexpr int kGroupsPerThread = kChunk / 4 / kThreads;
static_assert(kChunk % (4 * kThreads) == 0, "a thread updates whole groups of 4 elements");

template <DType kGrad>
struct ChunkLayout {
  using GradStorage = detail::Storage<kGrad>;
  static constexpr std::uint32_t kGradBytes = kChunk * sizeof(GradStorage);
  static constexpr std::uint32_t kHalfBytes = kChunk * sizeof(std::uint16_t);  // weight, remainder
  static constexpr std::uint32_t kMomentBytes = kChunk * sizeof(float);
  // Within a stage: gradient, weight, remainder, exp_avg, exp_avg_sq (each 16-byte aligned).
  static constexpr std::uint32_t kWeight = kGradBytes;
  static constexpr std::uint32_t kRemainder = kWeight + kHalfBytes;
  static constexpr std::uint32_t kExpAvg = kRemainder + kHalfBytes;
  static constexpr std::uint32_t kExpAvgSq = kExpAvg + kMomentBytes;
  static constexpr std::uint32_t kStageBytes = kExpAvgSq + kMomentBytes;
  static constexpr std::size_t kSharedBytes = std::size_t{kStages} * kStageBytes + kStages * sizeof(std::uint64_t);
};

// Four consecutive elements between shared memory and registers in one access (the group's
// address is aligned to its size): load_vector and store_vector's shared-memory counterparts.
__device__ __forceinline__ void load_shared(const float* p, float (&out)[4]) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}
__device__ __forceinline__ void load_shared(const std::uint16_t* p, std::uint16_t (&out)[4]) {
  const ushort4 v = *reinterpret_cast<const ushort4*>(p);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
}
__device__ __forceinline__ void store_shared(float* p, const float (&in)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(in[0], in[1], in[2], in[3]);
}
__device__ __forceinline__ void store_shared(std::uint16_t* p, const std::uint16_t (&in)[4]) {
  *reinterpret_cast<ushort4*>(p) = make_ushort4(in[0], in[1], in[2], in[3]);
}

// Updates, in shared memory, this thread's elements of the chunk starting at `first` that lie
// in [begin, end), one segment's overlap with the chunk.
template <DType kGrad>
__device__ __forceinline__ void update_overlap(unsigned char* stage, const AdamConstants& c, std::int64_t first,
                                               std::int64_t begin, std::int64_t end, bool decay) {
  using Layout = ChunkLayout<kGrad>;
  using GradStorage = typename Layout::GradStorage;
  const auto* g = reinterpret_cast<const GradStorage*>(stage);
  auto* high = reinterpret_cast<std::uint16_t*>(stage + Layout::kWeight);
  auto* low = reinterpret_cast<std::uint16_t*>(stage + Layout::kRemainder);
  auto* m = reinterpret_cast<float*>(stage + Layout::kExpAvg);
  auto* v = reinterpret_cast<float*>(stage + Layout::kExpAvgSq);
  // A group of 4 elements a thread at a time, in 8- and 16-byte shared-memory accesses: a warp's
  // accesses then cover consecutive bytes, without bank conflicts.
#pragma unroll
  for (int k = 0; k < kGroupsPerThread; ++k) {
    const int local = 4 * (static_cast<int>(threadIdx.x) + k * kThreads);
    const std::int64_t group = first + local;
    if (group >= end || group + 4 <= begin) continue;
    GradStorage g4[4];
    std::uint16_t high4[4], low4[4];
    float m4[4], v4[4];
    load_shared(g + local, g4);
    load_shared(high + local, high4);
    load_shared(low + local, low4);
    load_shared(m + local, m4);
    load_shared(v + local, v4);
    if (group >= begin && group + 4 <= end) {
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        const float p = adam_update(detail::join_remainder_bits(high4[lane], low4[lane]),
                                    detail::to_f32<kGrad>(g4[lane]), m4[lane], v4[lane], decay, c);
        detail::split_remainder_bits(p, high4[lane], low4[lane]);
      }
    } else {  // cut by the overlap's edge
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        if (group + lane < begin || group + lane >= end) continue;
        const float p = adam_update(detail::join_remainder_bits(high4[lane], low4[lane]),
                                    detail::to_f32<kGrad>(g4[lane]), m4[lane], v4[lane], decay, c);
        detail::split_remainder_bits(p, high4[lane], low4[lane]);
      }
    }
    store_shared(high + local, high4);
    store_shared(low + local, low4);
    store_shared(m + local, m4);
    store_shared(v + local, v4);
  }
}

template <DType kGrad>
__global__ void __launch_bounds__(kThreads, 1) adam_bulk_kernel(AdamOperands ops, AdamConstants c) {
  if (!take_step_factor(c)) return;  // before any barrier or copy: the whole block leaves
  namespace tma = detail;
  using Layout = ChunkLayout<kGrad>;
  using GradStorage = typename Layout::GradStorage;
  extern __shared__ __align__(128) unsigned char shared[];
  auto* full = reinterpret_cast<std::uint64_t*>(shared + kStages * Layout::kStageBytes);
  const auto* grad = static_cast<const GradStorage*>(ops.grad);
  auto* weight = static_cast<std::uint16_t*>(ops.model_param);

  const std::int64_t chunks = ops.numel / kChunk;
  const std::int64_t mine = blockIdx.x < chunks ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const auto first_of = [&](std::int64_t turn) {
    return (static_cast<std::int64_t>(blockIdx.x) + turn * gridDim.x) * kChunk;
  };
  const auto stage_of = [&](std::int64_t turn) { return shared + (turn % kStages) * Layout::kStageBytes; };
  // Every operand is read and written once a step: its copies are marked to leave L2 first, as
  // adam.cu's streaming accesses are.
  const std::uint64_t once = threadIdx.x == 0 ? tma::evict_first_policy() : 0;
  const auto fetch = [&](std::int64_t turn) {  // one thread
    unsigned char* stage = stage_of(turn);
    std::uint64_t* barrier = &full[turn % kStages];
    const std::int64_t first = first_of(turn);
    const auto from = [](const void* global) { return static_cast<const unsigned char*>(global); };
    tma::barrier_arrive_expecting(barrier, Layout::kStageBytes);
    tma::copy_bytes_async<Layout::kGradBytes>(stage, from(grad + first), barrier, once);
    tma::copy_bytes_async<Layout::kHalfBytes>(stage + Layout::kWeight, from(weight + first), barrier, once);
    tma::copy_bytes_async<Layout::kHalfBytes>(stage + Layout::kRemainder, from(ops.remainder + first), barrier, once);
    tma::copy_bytes_async<Layout::kMomentBytes>(stage + Layout::kExpAvg, from(ops.exp_avg + first), barrier, once);
    tma::copy_bytes_async<Layout::kMomentBytes>(stage + Layout::kExpAvgSq, from(ops.exp_avg_sq + first), barrier, once);
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) tma::barrier_init(&full[s], 1);
    tma::barrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (std::int64_t turn = 0; turn < mine && turn < kStages; ++turn) fetch(turn);
  }
  int first_segment = 0;
  for (std::int64_t turn = 0; turn < mine; ++turn) {
    unsigned char* stage = stage_of(turn);
    const std::int64_t first = first_of(turn);
    const std::int64_t last = first + kChunk;
    // The segment walk reads only the table, so it runs while the chunk's copies land.
    first_segment = tma::next_segment_ending_after(ops.segments, ops.num_segments, first_segment, first);
    tma::barrier_wait(&full[turn % kStages], static_cast<std::uint32_t>((turn / kStages) & 1));
    for (int s = first_segment; s < ops.num_segments; ++s) {
      const std::int64_t begin = __ldg(ops.segments + 3 * s);
      if (begin >= last) break;
      update_overlap<kGrad>(stage, c, first, begin, __ldg(ops.segments + 3 * s + 1),
                            __ldg(ops.segments + 3 * s + 2) != 0);
    }
    tma::fence_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
      const auto base = static_cast<std::uint32_t>(__cvta_generic_to_shared(stage));
      tma::store_bytes_async<Layout::kHalfBytes>(reinterpret_cast<unsigned char*>(weight + first),
                                                 base + Layout::kWeight, once);
      tma::store_bytes_async<Layout::kHalfBytes>(reinterpret_cast<unsigned char*>(ops.remainder + first),
                                                 base + Layout::kRemainder, once);
      tma::store_bytes_async<Layout::kMomentBytes>(reinterpret_cast<unsigned char*>(ops.exp_avg + first),
                                                   base + Layout::kExpAvg, once);
      tma::store_bytes_async<Layout::kMomentBytes>(reinterpret_cast<unsigned char*>(ops.exp_avg_sq + first),
                                                   base + Layout::kExpAvgSq, once);
      tma::commit_stores();
      // The previous chunk's stage, once its copies back have read it (all but this chunk's group).
      if (turn >= 1 && turn - 1 + kStages < mine) {
        tma::wait_stores_read<1>();
        fetch(turn - 1 + kStages);
      }
    }
  }
  if (threadIdx.x == 0) tma::wait_stores_done();
  if (blockIdx.x == 0) {
    // The tail, element by element from global memory.
    int segment = 0;
    for (std::int64_t e = chunks * kChunk + threadIdx.x; e < ops.numel; e += kThreads) {
      segment = tma::next_segment_ending_after(ops.segments, ops.num_segments, segment, e);
      if (segment >= ops.num_segments || __ldg(ops.segments + 3 * segment) > e) continue;  // padding
      const bool decay = __ldg(ops.segments + 3 * segment + 2) != 0;
      const float p = adam_update(detail::join_remainder_bits(weight[e], ops.remainder[e]),
                                  detail::to_f32<kGrad>(grad[e]), ops.exp_avg[e], ops.exp_avg_sq[e], decay, c);
      detail::split_remainder_bits(p, weight[e], ops.remainder[e]);
    }
  }
}

template <DType kGrad>
cudaError_t launch_bulk(const AdamOperands& ops, const AdamConstants& c, int blocks, cudaStream_t stream) {
  using Layout = ChunkLayout<kGrad>;
  const std::int64_t chunks = ops.numel / kChunk;
  const int grid = static_cast<int>(chunks < blocks ? (chunks > 0 ? chunks : 1) : blocks);
  const cudaError_t status = cudaFuncSetAttribute(adam_bulk_kernel<kGrad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(Layout::kSharedBytes));
  if (status != cudaSuccess) return status;
  adam_bulk_kernel<kGrad><<<grid, kThreads, Layout::kSharedBytes, stream>>>(ops, c);
  return cudaGetLastError();
}

bool aligned_for_bulk_copies(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

bool adam_bulk_supported(const AdamOperands& operands) {
  return aligned_for_bulk_copies(operands.grad) && aligned_for_bulk_copies(operands.model_param) &&
         aligned_for_bulk_copies(operands.remainder) && aligned_for_bulk_copies(operands.exp_avg) &&
         aligned_for_bulk_copies(operands.exp_avg_sq);
}

}  // namespace

cudaError_t adam_bulk(const AdamOperands& operands, DType grad_dtype, const AdamConstants& constants, int blocks,
                      cudaStream_t stream) {
  if (operands.numel == 0 || operands.num_segments == 0) return cudaSuccess;
  if (blocks < 1 || !adam_bulk_supported(operands)) return cudaErrorInvalidValue;
  switch (grad_dtype) {
    case DType::f32:
      return launch_bulk<DType::f32>(operands, constants, blocks, stream);
    case DType::bf16:
      return launch_bulk<DType::bf16>(operands, constants, blocks, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::launchers
