// Tensor-level entry points of the CUDA decoding-step kernels: make the data's GPU
// current, launch, and turn a failure into adamant::Error naming the kernel.
#include "adamant/kernels/cuda/decode_cuda.h"

#include <climits>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/decode_launchers.h"

namespace adamant::kernels::cuda {

static_assert(launchers::kMaxHeadDim == kMaxDecodeHeadDim);

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, std::int64_t vocab, std::int64_t places,
                      const Stream& stream) {
  constexpr const char* kOp = "decode_embedding";
  const CudaLaunchGuard guard(word.device, kOp);
  check_cuda_launch(launchers::decode_embedding(
                        static_cast<const std::int32_t*>(tokens.data), static_cast<const std::int32_t*>(positions.data),
                        word.data, position.data, out.data, batch, channels, vocab, places, cuda_stream_of(stream)),
                    kOp);
}

void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream) {
  constexpr const char* kOp = "decode_attention";
  ADAMANT_CHECK(shape.capacity <= launchers::kMaxDecodeCapacity,
                "{}: a cache of {} positions per sequence; the GPU kernel keeps at most {} scores in shared memory",
                kOp, shape.capacity, launchers::kMaxDecodeCapacity);
  ADAMANT_CHECK(shape.batch * shape.heads < INT_MAX, "{}: {} sequences x heads in one launch", kOp,
                shape.batch * shape.heads);
  const CudaLaunchGuard guard(qkv.device, kOp);
  check_cuda_launch(launchers::decode_attention(qkv.data, cache.data, static_cast<const std::int32_t*>(positions.data),
                                                out.data, static_cast<int>(shape.batch),
                                                static_cast<int>(shape.capacity), static_cast<int>(shape.heads),
                                                static_cast<int>(shape.head_dim), cuda_stream_of(stream)),
                    kOp);
}

}  // namespace adamant::kernels::cuda
