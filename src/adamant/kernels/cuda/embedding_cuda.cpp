// The CUDA entry points for the token + position embeddings (model_kernels_cuda.h),
// called by their dispatchers with checked operands (bf16 tables and activations, fp32
// gradients, int32 tokens on one GPU): make that GPU current, launch, and turn a failure into adamant::Error.
// Token ids are not checked here (they are in GPU memory); embedding_forward writes
// NaN rows for negative ids and zero word rows for ids outside this rank's slice of
// the vocabulary, which backward ignores. An empty position / d_position is skipped.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/model_kernels_cuda.h"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"

namespace adamant::kernels::cuda {

namespace {

launchers::PointwiseLaunch launch_for(const CudaLaunchGuard& guard, const Stream& stream, bool vectorized) {
  return {cuda_multiprocessor_count(guard.device_index()), vectorized, cuda_stream_of(stream)};
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& word, const Tensor& position, Tensor out,
                       const EmbeddingShape& shape, const Stream& stream) {
  constexpr const char* kOp = "embedding_forward";
  const Device device = word.device;
  const CudaLaunchGuard guard(device, kOp);
  const bool vectorized = aligned_to(word, 16) && aligned_to(position, 16) && aligned_to(out, 16);
  check_cuda_launch(
      launchers::embedding_forward(
          static_cast<const std::int32_t*>(tokens.data), static_cast<const std::uint16_t*>(word.data),
          static_cast<const std::uint16_t*>(position.data), static_cast<std::uint16_t*>(out.data), shape.batch,
          shape.seq, shape.channels, shape.vocab, shape.vocab_start, launch_for(guard, stream, vectorized)),
      kOp);
}

void embedding_backward(const Tensor& d_out, const Tensor& tokens, Tensor d_word, Tensor d_position,
                        const EmbeddingShape& shape, const Stream& stream) {
  constexpr const char* kOp = "embedding_backward";
  const Device device = d_out.device;
  const CudaLaunchGuard guard(device, kOp);
  const bool vectorized = aligned_to(d_out, 16) && aligned_to(d_position, 16);
  check_cuda_launch(launchers::embedding_backward(
                        static_cast<const std::uint16_t*>(d_out.data), static_cast<const std::int32_t*>(tokens.data),
                        static_cast<float*>(d_word.data), static_cast<float*>(d_position.data), shape.batch, shape.seq,
                        shape.channels, shape.vocab, shape.vocab_start, launch_for(guard, stream, vectorized)),
                    kOp);
}

}  // namespace adamant::kernels::cuda
