#pragma once
// Row-major matrix products through cuBLASLt, with the bias and bias-gradient
// epilogues: the building block of cuda::gemm, the linear layer and the fused
// classifier. cuBLASLt is column-major; a row-major matrix is its column-major
// transpose, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T with the
// operands swapped. Only for host files compiled in CUDA builds.
#include <cstdint>

#include "adamant/core/device.h"
#include "adamant/core/dtype.h"
#include "adamant/core/stream.h"
#include "adamant/kernels/cuda/cublaslt_context.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/workspace.h"

namespace adamant::kernels::cuda {

// A row-major matrix as stored: `row_stride` elements between consecutive rows
// (at least the stored row length; larger for a view into a wider matrix).
struct MatrixOperand {
  const void* data = nullptr;
  DType dtype = DType::bf16;
  std::int64_t row_stride = 0;
};

enum class MatmulEpilogue : std::uint8_t {
  none,
  add_bias,  // c[i, j] += bias[j]; bias has n elements of bias_dtype
  // GELU's tanh approximation of the product plus the bias, applied in fp32 before c is
  // rounded: aux = op(a) op(b) + bias (the pre-activation, kept for the backward), c = gelu(aux).
  tanh_gelu_aux_bias,
  // The tanh GELU's gradient: c = op(a) op(b) * gelu'(aux), aux the pre-activation (read).
  tanh_dgelu,
};

struct MatmulProblem {
  Transpose transpose_a = Transpose::no;
  Transpose transpose_b = Transpose::no;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;  // 0 ignores c's old contents
  MatrixOperand a;    // stored [m, k], or [k, m] when transpose_a
  MatrixOperand b;    // stored [k, n], or [n, k] when transpose_b
  void* c = nullptr;  // [m, n] row-major, c_row_stride elements per row
  DType c_dtype = DType::bf16;
  std::int64_t c_row_stride = 0;
  MatmulEpilogue epilogue = MatmulEpilogue::none;
  void* bias = nullptr;
  DType bias_dtype = DType::bf16;
  // The GELU epilogues' pre-activation, [m, n] of c's dtype at c's row stride, 16-byte aligned.
  void* aux = nullptr;
};

// c = alpha * op(a) op(b) + beta * c (+ the epilogue), enqueued on `stream` with the
// cuBLASLt handle, plans and workspace of `workspace` (made for that stream); fp32
// accumulation. Operand dtypes: a and b both bf16 with c bf16 or fp32, or all fp32.
// Throws adamant::Error for unsupported dtypes, problems cuBLASLt has no algorithm for,
// or cuBLAS failures.
void matmul(const MatmulProblem& problem, Workspace& workspace, const Stream& stream);

// The cudaStream_t of a Stream (the legacy default stream for the CPU stream).
cudaStream_t stream_handle(const Stream& stream);

}  // namespace adamant::kernels::cuda
