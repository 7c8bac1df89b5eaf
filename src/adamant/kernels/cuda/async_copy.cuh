#pragma once
// Asynchronous global-to-shared copies (cp.async, sm_80 and later): a thread issues
// copies that complete in the background, commits them as a group and later waits
// for its own groups, as the cross-entropy's row staging does; and the shared-memory
// address the attention kernels' products and copies name. Only for *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::detail {

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes from src to dst, zeros instead where `valid` is false; .cg bypasses L1, whose
// copy would never be read again.
__device__ __forceinline__ void copy_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace adamant::kernels::cuda::detail
