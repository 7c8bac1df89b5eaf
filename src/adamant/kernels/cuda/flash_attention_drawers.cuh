#pragma once
// Drawers: a warpgroup of an attention kernel's block that makes the dropout mask's
// Philox draws for the product warpgroups, in the issue slots those leave empty while they
// wait on their products and exponentials. The draws' words go through kStages tiles of
// shared memory; each stage has a `full` barrier (every drawer thread arrives once it has
// written its words) and an `empty` one (every product warp arrives once it has read its
// own). `setmaxnreg` moves registers from the drawers, which need few, to the product
// warpgroups within the block's own allocation (its threads times the kernel's register
// count): a request that allocation cannot meet hangs the block, so the kernels check the
// sum at compile time. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda/tensor_copy.cuh"

namespace adamant::kernels::cuda::flash_detail {

// Gives this warpgroup's registers back to the block's pool down to kRegisters a thread
// (every thread of the warpgroup runs it).
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
// Takes registers from the block's pool up to kRegisters a thread; waits until the pool has them.
template <int kRegisters>
__device__ __forceinline__ void take_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// Registers a thread at launch for kThreads threads a block and kBlocks blocks a
// multiprocessor (the allocation unit is 8 a thread), and whether kProductThreads at
// kProductRegisters and the rest at kDrawerRegisters fit in the block's allocation.
constexpr int launch_registers(int threads, int blocks) { return 65536 / (threads * blocks) / 8 * 8; }
constexpr bool registers_fit(int threads, int blocks, int product_threads, int product_registers,
                             int drawer_registers) {
  return product_threads * product_registers + (threads - product_threads) * drawer_registers <=
         threads * launch_registers(threads, blocks);
}

// The stages' barriers between kDrawerThreads drawer threads and kProductWarps product warps.
template <int kStages, int kDrawerThreads, int kProductWarps>
struct DrawBarriers {
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];

  // By one thread, before the barrier-initialisation fence and the block's __syncthreads.
  __device__ void init() {
#pragma unroll
    for (int stage = 0; stage < kStages; ++stage) {
      detail::barrier_init(&full[stage], kDrawerThreads);
      detail::barrier_init(&empty[stage], kProductWarps);
    }
  }
  // By every drawer thread before writing tile i's words: waits until the product warps
  // have read tile i - kStages's. Returns the stage.
  __device__ int acquire(int i) {
    const int stage = i % kStages;
    if (i >= kStages) detail::barrier_wait(&empty[stage], static_cast<std::uint32_t>(i / kStages - 1) & 1u);
    return stage;
  }
  // By every drawer thread once its words of tile i are written.
  __device__ void publish(int i) { detail::barrier_arrive(&full[i % kStages]); }
  // By every product thread before reading tile i's words. Returns the stage.
  __device__ int wait(int i) {
    const int stage = i % kStages;
    detail::barrier_wait(&full[stage], static_cast<std::uint32_t>(i / kStages) & 1u);
    return stage;
  }
  // By every product thread once its warp has read its words of tile i (one arrival a warp).
  __device__ void release(int i, int lane) {
    __syncwarp();
    if (lane == 0) detail::barrier_arrive(&empty[i % kStages]);
  }
};

}  // namespace adamant::kernels::cuda::flash_detail
