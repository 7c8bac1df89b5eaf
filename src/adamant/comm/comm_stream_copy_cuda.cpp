#include <cuda_runtime.h>

#include <cstring>

#include "adamant/comm/comm_stream.h"
#include "adamant/core/cuda_check.h"

namespace adamant::comm {

void copy_bytes_on_stream(void* dst, const void* src, std::size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  if (stream.device().is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  ADAMANT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream.handle())));
}

}  // namespace adamant::comm
