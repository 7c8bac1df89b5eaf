#pragma once
// An elementwise update of four fp32 arrays (a gradient read; a weight and two moments read
// and written: the 28 bytes a parameter of Adam) whose operands move by bulk copies
// (cp.async.bulk, sm_90) instead of loads and stores: one thread of a block issues whole
// chunks of the four arrays into shared memory, kBulkStages chunks deep, and the three
// updated ones back, so that an SM keeps about 128 KiB of reads in flight without a register
// or an instruction per 16 bytes. sm_partition_overlap_bench asks with it how much of the
// memory's bandwidth a few SMs can draw (plain loads drew 55-70 GB/s an SM), which decides
// whether the optimizer's update can run on a few SMs beside the next forward's GEMMs.
// Only for *.cu files.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/tensor_copy.cuh"

namespace adamant::bench {

constexpr int kBulkThreads = 256;
constexpr int kBulkChunk = 4096;  // elements of each array a chunk: 16 KiB
constexpr int kBulkStages = 3;
constexpr int kBulkArrays = 4;  // gradient, weight, first and second moment
constexpr std::uint32_t kBulkChunkBytes = kBulkChunk * sizeof(float);
constexpr std::size_t kBulkStageBytes = std::size_t{kBulkArrays} * kBulkChunkBytes;
// The stages, then one barrier a stage.
constexpr std::size_t kBulkSharedBytes = kBulkStages * kBulkStageBytes + kBulkStages * sizeof(std::uint64_t);

// Chunk c of the arrays (the chunks of count / kBulkChunk, c = block, block + grid, ...) goes
// through stage c's turn % kBulkStages; `step(g, w, m, v)` updates one element in registers.
// The last count % kBulkChunk elements are updated by block 0's threads from global memory.
// The arrays must be 16-byte aligned.
template <typename Step>
__global__ void __launch_bounds__(kBulkThreads, 1)
    bulk_update(const float* grad, float* weight, float* exp_avg, float* exp_avg_sq, std::int64_t count, Step step) {
  namespace tma = adamant::kernels::cuda::detail;
  extern __shared__ __align__(128) unsigned char shared[];
  auto* full = reinterpret_cast<std::uint64_t*>(shared + kBulkStages * kBulkStageBytes);
  const auto stage_array = [&](int stage, int array) {
    return reinterpret_cast<float*>(shared + stage * kBulkStageBytes + array * std::size_t{kBulkChunkBytes});
  };
  const std::int64_t chunks = count / kBulkChunk;
  const std::int64_t mine = blockIdx.x < chunks ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const auto first_of = [&](std::int64_t turn) {
    return (static_cast<std::int64_t>(blockIdx.x) + turn * gridDim.x) * kBulkChunk;
  };
  const auto fetch = [&](std::int64_t turn) {  // thread 0 only
    const int stage = static_cast<int>(turn % kBulkStages);
    const std::int64_t first = first_of(turn);
    tma::barrier_arrive_expecting(&full[stage], kBulkArrays * kBulkChunkBytes);
    const float* sources[kBulkArrays] = {grad + first, weight + first, exp_avg + first, exp_avg_sq + first};
    for (int a = 0; a < kBulkArrays; ++a) {
      tma::copy_bytes_async<kBulkChunkBytes>(reinterpret_cast<unsigned char*>(stage_array(stage, a)),
                                             reinterpret_cast<const unsigned char*>(sources[a]), &full[stage]);
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kBulkStages; ++s) tma::barrier_init(&full[s], 1);
    tma::barrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (std::int64_t turn = 0; turn < mine && turn < kBulkStages; ++turn) fetch(turn);
  }
  for (std::int64_t turn = 0; turn < mine; ++turn) {
    const int stage = static_cast<int>(turn % kBulkStages);
    tma::barrier_wait(&full[stage], static_cast<std::uint32_t>((turn / kBulkStages) & 1));
    const auto* g = reinterpret_cast<const float4*>(stage_array(stage, 0));
    auto* w = reinterpret_cast<float4*>(stage_array(stage, 1));
    auto* m = reinterpret_cast<float4*>(stage_array(stage, 2));
    auto* v = reinterpret_cast<float4*>(stage_array(stage, 3));
#pragma unroll
    for (int i = static_cast<int>(threadIdx.x); i < kBulkChunk / 4; i += kBulkThreads) {
      const float4 gi = g[i];
      float4 wi = w[i], mi = m[i], vi = v[i];
      step(gi.x, wi.x, mi.x, vi.x);
      step(gi.y, wi.y, mi.y, vi.y);
      step(gi.z, wi.z, mi.z, vi.z);
      step(gi.w, wi.w, mi.w, vi.w);
      w[i] = wi;
      m[i] = mi;
      v[i] = vi;
    }
    tma::fence_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
      const std::int64_t first = first_of(turn);
      const std::uint64_t once = tma::evict_first_policy();  // each value is read and written once
      float* destinations[] = {weight + first, exp_avg + first, exp_avg_sq + first};
      for (int a = 1; a < kBulkArrays; ++a) {
        tma::store_bytes_async<kBulkChunkBytes>(
            reinterpret_cast<unsigned char*>(destinations[a - 1]),
            static_cast<std::uint32_t>(__cvta_generic_to_shared(stage_array(stage, a))), once);
      }
      tma::commit_stores();
      if (turn + kBulkStages < mine) {
        tma::wait_stores_read<0>();
        fetch(turn + kBulkStages);
      }
    }
  }
  if (threadIdx.x == 0) tma::wait_stores_done();
  if (blockIdx.x == 0) {
    for (std::int64_t i = chunks * kBulkChunk + threadIdx.x; i < count; i += kBulkThreads) {
      step(grad[i], weight[i], exp_avg[i], exp_avg_sq[i]);
    }
  }
}

}  // namespace adamant::bench
