#pragma once
// Residual connection: the sum of the stream and a branch.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

namespace cpu {
void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n);
}  // namespace cpu

// Launcher in kernels/cuda/pointwise_model.cu (bf16 bit patterns); returns its cudaError_t.
namespace cuda {
int residual_add(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::int64_t n,
                 const CudaLaunch& launch);
}  // namespace cuda

// out = a + b over n elements; out may alias a or b.
inline void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream) {
  const KernelCall call = KernelCall::model("residual_add", a, stream);
  call.exact("a", a, n, Role::activation);
  call.exact("b", b, n, Role::activation);
  call.exact("out", out, n, Role::activation);
  call.run([&] { cpu::residual_add(a, b, out, n); },
           ADAMANT_CUDA_CALL(cuda::residual_add(bits16_of(a), bits16_of(b), bits16_of(out), n,
                                                launch.vectorized_if(aligned_to(16, {&a, &b, &out})))));
}

}  // namespace adamant::kernels
