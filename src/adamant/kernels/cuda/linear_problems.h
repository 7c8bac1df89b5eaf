#pragma once
// The GEMM's and the linear layer's cuBLASLt products as MatmulProblems over row-major
// tensors, built once for cuda::gemm, the plain linear layer (linear_cuda.cpp) and the
// layer with GELU in its epilogues (linear_gelu_cuda.cpp), which set another epilogue on
// the same problems. Only for host files compiled in CUDA builds.
#include <cstdint>

#include "adamant/core/tensor.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels::cuda {

// c[m, n] = op(a) op(b), the operands stored whole: a [m, k] ([k, m] transposed), b [k, n]
// ([n, k] transposed); no epilogue, beta 0.
inline MatmulProblem matmul_problem(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n,
                                    std::int64_t k, const Tensor& a, const Tensor& b, const Tensor& c) {
  MatmulProblem problem;
  problem.transpose_a = transpose_a;
  problem.transpose_b = transpose_b;
  problem.m = m;
  problem.n = n;
  problem.k = k;
  problem.a = {a.data, a.dtype, transpose_a == Transpose::yes ? m : k};
  problem.b = {b.data, b.dtype, transpose_b == Transpose::yes ? k : n};
  problem.c = c.data;
  problem.c_dtype = c.dtype;
  problem.c_row_stride = n;
  return problem;
}

// out[rows, out] = in[rows, in] weight[out, in]^T.
inline MatmulProblem linear_forward_problem(const Tensor& in, const Tensor& weight, const Tensor& out,
                                            const LinearShape& shape) {
  return matmul_problem(Transpose::no, Transpose::yes, shape.rows, shape.out_features, shape.in_features, in, weight,
                        out);
}

// d_in[rows, in] = d_out[rows, out] weight[out, in].
inline MatmulProblem linear_data_grad_problem(const Tensor& d_out, const Tensor& weight, const Tensor& d_in,
                                              const LinearShape& shape) {
  return matmul_problem(Transpose::no, Transpose::no, shape.rows, shape.in_features, shape.out_features, d_out, weight,
                        d_in);
}

// d_weight[out, in] = d_out[rows, out]^T in[rows, in] (beta 0: set it to add).
inline MatmulProblem linear_weight_grad_problem(const Tensor& d_out, const Tensor& in, const Tensor& d_weight,
                                                const LinearShape& shape) {
  return matmul_problem(Transpose::yes, Transpose::no, shape.out_features, shape.in_features, shape.rows, d_out, in,
                        d_weight);
}

}  // namespace adamant::kernels::cuda
