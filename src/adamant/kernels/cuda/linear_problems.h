#pragma once
// The linear layer's cuBLASLt products (kernels/linear.h's shapes, row-major operands),
// built once for the plain layer (linear_cuda.cpp) and the layer with GELU in its
// epilogues (linear_gelu_cuda.cpp), which set another epilogue on the same problems.
// Only for host files compiled in CUDA builds.
#include "adamant/core/tensor.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels::cuda {

// out[rows, out] = in[rows, in] weight[out, in]^T, no epilogue.
inline MatmulProblem linear_forward_problem(const Tensor& in, const Tensor& weight, const Tensor& out,
                                            const LinearShape& shape) {
  MatmulProblem problem;
  problem.transpose_b = Transpose::yes;
  problem.m = shape.rows;
  problem.n = shape.out_features;
  problem.k = shape.in_features;
  problem.a = {in.data, in.dtype, shape.in_features};
  problem.b = {weight.data, weight.dtype, shape.in_features};
  problem.c = out.data;
  problem.c_dtype = out.dtype;
  problem.c_row_stride = shape.out_features;
  return problem;
}

// d_in[rows, in] = d_out[rows, out] weight[out, in], no epilogue.
inline MatmulProblem linear_data_grad_problem(const Tensor& d_out, const Tensor& weight, const Tensor& d_in,
                                              const LinearShape& shape) {
  MatmulProblem problem;
  problem.m = shape.rows;
  problem.n = shape.in_features;
  problem.k = shape.out_features;
  problem.a = {d_out.data, d_out.dtype, shape.out_features};
  problem.b = {weight.data, weight.dtype, shape.in_features};
  problem.c = d_in.data;
  problem.c_dtype = d_in.dtype;
  problem.c_row_stride = shape.in_features;
  return problem;
}

// d_weight[out, in] = d_out[rows, out]^T in[rows, in] (beta 0: set it to add), no epilogue.
inline MatmulProblem linear_weight_grad_problem(const Tensor& d_out, const Tensor& in, const Tensor& d_weight,
                                                const LinearShape& shape) {
  MatmulProblem problem;
  problem.transpose_a = Transpose::yes;
  problem.m = shape.out_features;
  problem.n = shape.in_features;
  problem.k = shape.rows;
  problem.a = {d_out.data, d_out.dtype, shape.out_features};
  problem.b = {in.data, in.dtype, shape.in_features};
  problem.c = d_weight.data;
  problem.c_dtype = d_weight.dtype;
  problem.c_row_stride = shape.in_features;
  return problem;
}

}  // namespace adamant::kernels::cuda
