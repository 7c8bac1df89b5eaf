// The CUDA entry points for GELU, residual add and dropout (model_kernels_cuda.h),
// called by their dispatchers with checked operands (bf16 on one GPU): make that GPU current, launch, and turn a
// launch failure into adamant::Error.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/model_kernels_cuda.h"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"

namespace adamant::kernels::cuda {

namespace {

const std::uint16_t* bits_of(const Tensor& t) { return static_cast<const std::uint16_t*>(t.data); }
std::uint16_t* mutable_bits_of(const Tensor& t) { return static_cast<std::uint16_t*>(t.data); }

launchers::PointwiseLaunch launch_for(const CudaLaunchGuard& guard, const Stream& stream, bool vectorized) {
  return {cuda_multiprocessor_count(guard.device_index()), vectorized, cuda_stream_of(stream)};
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form, const Stream& stream) {
  constexpr const char* kOp = "gelu_forward";
  const CudaLaunchGuard guard(x.device, kOp);
  const bool vectorized = aligned_to(x, 16) && aligned_to(out, 16);
  check_cuda_launch(launchers::gelu_forward(bits_of(x), mutable_bits_of(out), n, form == GeluForm::tanh,
                                            launch_for(guard, stream, vectorized)),
                    kOp);
}

void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, GeluForm form,
                   const Stream& stream) {
  constexpr const char* kOp = "gelu_backward";
  const CudaLaunchGuard guard(x.device, kOp);
  const bool vectorized = aligned_to(d_out, 16) && aligned_to(x, 16) && aligned_to(d_x, 16);
  check_cuda_launch(launchers::gelu_backward(bits_of(d_out), bits_of(x), mutable_bits_of(d_x), n,
                                             form == GeluForm::tanh, launch_for(guard, stream, vectorized)),
                    kOp);
}

void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream) {
  constexpr const char* kOp = "residual_add";
  const CudaLaunchGuard guard(a.device, kOp);
  const bool vectorized = aligned_to(a, 16) && aligned_to(b, 16) && aligned_to(out, 16);
  check_cuda_launch(
      launchers::residual_add(bits_of(a), bits_of(b), mutable_bits_of(out), n, launch_for(guard, stream, vectorized)),
      kOp);
}

void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& args,
             const Stream& stream) {
  constexpr const char* kOp = "dropout";
  const CudaLaunchGuard guard(in.device, kOp);
  launchers::DropoutParams params;
  params.probability = args.probability;
  // The CPU kernel's keep scale, T(1) / (T(1) - p) in fp32, so kept values agree bit for bit.
  params.keep_scale = 1.0f / (1.0f - args.probability);
  params.seed = args.seed;
  params.first_sample_index = args.first_sample_index;
  params.site = args.site;
  params.first_element = args.first_element;
  // Decisions come in groups of 4 per sample: with whole groups (sample_numel % 4 == 0,
  // first_element % 4 == 0) each is one 8-byte access of an 8-byte aligned operand.
  const bool vectorized = sample_numel % kDropoutGroup == 0 && aligned_to(in, 8) && aligned_to(out, 8);
  check_cuda_launch(launchers::dropout(bits_of(in), mutable_bits_of(out), numel, sample_numel, params,
                                       launch_for(guard, stream, vectorized)),
                    kOp);
}

}  // namespace adamant::kernels::cuda
