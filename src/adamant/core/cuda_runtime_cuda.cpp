#include <cuda_runtime.h>

#include <cstring>

#include "adamant/core/cuda_check.h"
#include "adamant/core/cuda_runtime.h"
#include "adamant/core/device.h"

namespace adamant::cuda {

void* malloc_zeroed(std::size_t bytes, int device) {
  set_device(device);
  void* ptr = nullptr;
  ADAMANT_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  ADAMANT_CUDA_CHECK(cudaMemset(ptr, 0, bytes));
  // cudaMemset runs on the legacy stream, which non-blocking streams do not wait for.
  ADAMANT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  return ptr;
}

void free(void* ptr, int device) noexcept {
  cudaSetDevice(device);
  cudaFree(ptr);
}

void copy(void* dst, const void* src, std::size_t bytes) {
  ADAMANT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  // From pageable host memory cudaMemcpy may return before the data has landed;
  // non-blocking streams are not ordered after it, so wait here: copy() is synchronous.
  ADAMANT_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

void* host_alloc_pinned(std::size_t bytes) {
  void* ptr = nullptr;
  ADAMANT_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault));
  std::memset(ptr, 0, bytes);
  return ptr;
}

void host_free_pinned(void* ptr) noexcept { cudaFreeHost(ptr); }

void set_device(int device) { ADAMANT_CUDA_CHECK(cudaSetDevice(device)); }

std::size_t device_memory_in_use(int device) {
  set_device(device);
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  ADAMANT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

std::size_t device_memory_total(int device) {
  set_device(device);
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  ADAMANT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes;
}

std::string device_name(int device) {
  cudaDeviceProp properties{};
  ADAMANT_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
  return properties.name;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace adamant::cuda

namespace adamant {
bool cuda_available() { return cuda::device_count() > 0; }
int cuda_device_count() { return cuda::device_count(); }
}  // namespace adamant
