// The CUDA runtime calls of KernelCall::run (kernels/dispatch.h).
#include <cuda_runtime.h>

#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels::cuda {

CurrentDevice::CurrentDevice(Device device) {
  ADAMANT_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device.index) ADAMANT_CUDA_CHECK(cudaSetDevice(device.index));
  current_ = device.index;
}

CurrentDevice::~CurrentDevice() {
  if (previous_ != current_) cudaSetDevice(previous_);
}

int multiprocessor_count(Device device) {
  int count = 0;
  ADAMANT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device.index));
  return count;
}

void fail_launch(const char* op, int status) {
  const auto error = static_cast<cudaError_t>(status);
  fail("{}: the CUDA kernel failed to launch: {} (error {})", op, cudaGetErrorString(error), status);
}

}  // namespace adamant::kernels::cuda
