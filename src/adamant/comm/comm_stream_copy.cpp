// CPU-only builds: the CUDA version is comm_stream_copy_cuda.cpp.
#ifndef ADAMANT_HAVE_CUDA
#include <cstring>

#include "adamant/comm/comm_stream.h"
#include "adamant/core/error.h"

namespace adamant::comm {

void copy_bytes_on_stream(void* dst, const void* src, std::size_t bytes, const Stream& stream) {
  ADAMANT_CHECK(stream.device().is_cpu(),
                "copy on a {} stream: this build has no CUDA support; reconfigure with "
                "-DADAMANT_CUDA=ON",
                stream.device().str());
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

}  // namespace adamant::comm
#endif
