#pragma once
// Host side of the flash attention kernels: the one switch from a run-time head size and
// dropout flag to a kernel instantiation, and the one launch shape (a block per
// kBlockRows queries or keys of each (sample, head), in the start order the kernels read from
// their block index: flash_attention_block.cuh's block_order). Only for *.cu files.
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_detail {

// Calls launch(std::integral_constant<int, head_dim>, std::bool_constant<dropout>) for
// one of the head sizes in `kHeadDims`; cudaErrorInvalidValue for any other.
template <int... kHeadDims, typename Launch>
cudaError_t with_head_dim_and_dropout(int head_dim, bool dropout, Launch&& launch) {
  cudaError_t status = cudaErrorInvalidValue;
  auto try_one = [&](auto head) {
    if (head_dim != decltype(head)::value) return false;
    status = dropout ? launch(head, std::true_type{}) : launch(head, std::false_type{});
    return true;
  };
  (try_one(std::integral_constant<int, kHeadDims>{}) || ...);
  return status;
}
// with_head_dim_and_dropout over flash_attention_launchers::kSupportedHeadDims.
template <typename Launch>
cudaError_t with_supported_head_dim_and_dropout(int head_dim, bool dropout, Launch&& launch) {
  using flash_attention_launchers::kSupportedHeadDims;
  return [&]<std::size_t... kIndex>(std::index_sequence<kIndex...>) {
    return with_head_dim_and_dropout<static_cast<int>(kSupportedHeadDims[kIndex])...>(head_dim, dropout, launch);
  }
  (std::make_index_sequence<kSupportedHeadDims.size()>{});
}

// `shared` rounded up to a multiple of kAlignment (the kernel asks for kAlignment bytes more).
template <std::size_t kAlignment>
__device__ __forceinline__ unsigned char* align_shared(unsigned char* shared) {
  const auto address = static_cast<std::size_t>(__cvta_generic_to_shared(shared));
  return shared + ((kAlignment - address % kAlignment) % kAlignment);
}

// kernel<<<(problem's slots, blocks of kRows rows), a warp per kWarpRows rows (or
// kBlockThreadCount threads), shared_bytes, stream>>>(args...), after raising the kernel's
// dynamic shared memory limit to shared_bytes.
template <int kRows = kBlockRows, int kBlockThreadCount = block_threads<kRows>(), typename Kernel, typename... Args>
cudaError_t launch_over_row_blocks(Kernel kernel, std::size_t shared_bytes,
                                   const flash_attention_launchers::Problem& problem, cudaStream_t stream,
                                   const Args&... args) {
  const cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned>(problem.slots()), static_cast<unsigned>((problem.seq + kRows - 1) / kRows));
  kernel<<<grid, kBlockThreadCount, shared_bytes, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::flash_detail
