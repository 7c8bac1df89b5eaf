#pragma once
// Host side of the flash attention kernels: the one switch from a run-time head size and
// dropout flag to a kernel instantiation, and the one launch shape (a block per
// kBlockRows queries or keys of each (sample, head), the heaviest causal blocks first
// by the kernels' own ordering of blockIdx.y). Only for *.cu files.
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_detail {

// Calls launch(std::integral_constant<int, head_dim>, std::bool_constant<dropout>) for a
// supported head size (64, 80, 96, 128); cudaErrorInvalidValue for any other.
template <typename Launch>
cudaError_t with_head_dim_and_dropout(int head_dim, bool dropout, Launch&& launch) {
  auto with_dropout = [&](auto head) {
    return dropout ? launch(head, std::true_type{}) : launch(head, std::false_type{});
  };
  switch (head_dim) {
    case 64:
      return with_dropout(std::integral_constant<int, 64>{});
    case 80:
      return with_dropout(std::integral_constant<int, 80>{});
    case 96:
      return with_dropout(std::integral_constant<int, 96>{});
    case 128:
      return with_dropout(std::integral_constant<int, 128>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// kernel<<<(batch * heads, blocks of kBlockRows rows), kThreads, shared_bytes, stream>>>(args...),
// after raising the kernel's dynamic shared memory limit to shared_bytes.
template <typename Kernel, typename... Args>
cudaError_t launch_over_row_blocks(Kernel kernel, std::size_t shared_bytes,
                                   const flash_attention_launchers::Problem& problem, cudaStream_t stream,
                                   const Args&... args) {
  const cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned>(problem.batch * problem.heads),
                  static_cast<unsigned>((problem.seq + kBlockRows - 1) / kBlockRows));
  kernel<<<grid, kThreads, shared_bytes, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::flash_detail
