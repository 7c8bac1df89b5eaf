#pragma once
// Host-side helpers for the Tensor-level CUDA entry points (*_cuda.cpp only): make
// the data's GPU current for a launch, get a Stream's cudaStream_t, and turn a launch
// status into an adamant::Error that names the kernel.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/cuda_check.h"
#include "adamant/core/device.h"
#include "adamant/core/error.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant {

// Makes `device` current for its lifetime and restores the caller's device after.
class CudaLaunchGuard {
 public:
  CudaLaunchGuard(Device device, const char* kernel) {
    ADAMANT_CHECK(device.is_cuda(), "CUDA kernel {} called on {} data; pass GPU tensors", kernel, device.str());
    ADAMANT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device.index) ADAMANT_CUDA_CHECK(cudaSetDevice(device.index));
    current_ = device.index;
  }
  ~CudaLaunchGuard() {
    if (previous_ != current_) cudaSetDevice(previous_);
  }
  CudaLaunchGuard(const CudaLaunchGuard&) = delete;
  CudaLaunchGuard& operator=(const CudaLaunchGuard&) = delete;

  int device_index() const { return current_; }

 private:
  int previous_ = 0;
  int current_ = 0;
};

inline cudaStream_t cuda_stream_of(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

inline int cuda_multiprocessor_count(int device_index) {
  int count = 0;
  ADAMANT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device_index));
  return count;
}

// Throws when a kernel launch (or its argument checks in the launcher) failed.
inline void check_cuda_launch(cudaError_t status, const char* kernel) {
  if (status != cudaSuccess) {
    fail("CUDA kernel {} failed to launch: {} (error {})", kernel, cudaGetErrorString(status),
         static_cast<int>(status));
  }
}

}  // namespace adamant
