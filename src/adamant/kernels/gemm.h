#pragma once
// Dense matrix multiply on row-major matrices (fp32 or fp64). On the CPU it goes
// through CBLAS when the build found one, else through a blocked loop.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

enum class Transpose : bool { no = false, yes = true };

namespace cpu {
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c);
}  // namespace cpu

namespace cuda {
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c, Workspace& workspace, const Stream& stream);
}  // namespace cuda

// c[m, n] = alpha * op(a)[m, k] * op(b)[k, n] + beta * c (beta == 0 ignores c's old contents).
// a is stored [m, k], or [k, m] when transpose_a is yes; b is stored [k, n], or [n, k].
// All three contiguous, same dtype (f32 or f64), same device. `workspace`: made with
// WorkspaceNeeds::matmul for `stream`.
inline void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 double alpha, const Tensor& a, const Tensor& b, double beta, Tensor c, Workspace& workspace,
                 const Stream& stream) {
  const KernelCall call = KernelCall::model("gemm", a, stream);
  call.uses_matmul(workspace);
  ADAMANT_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size {}x{}x{}", m, n, k);
  DType input = a.dtype, output = a.dtype;  // the CPU: one dtype throughout
  if (call.on_cuda()) {                     // a and b bf16 with c bf16 or fp32, or all three fp32
    input = a.dtype == DType::f32 ? DType::f32 : DType::bf16;
    output = input == DType::bf16 && c.dtype == DType::f32 ? DType::f32 : input;
  }
  call.exact("a", a, m * k, input);
  call.exact("b", b, k * n, input);
  call.exact("c", c, m * n, output);
  call.run([&] { cpu::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c); },
           ADAMANT_CUDA_CALL(cuda::gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c, workspace, stream)));
}

}  // namespace adamant::kernels
