// The up projection and tanh GELU in one cuBLASLt product (kernels/linear_gelu.h).
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/linear_gelu.h"

namespace adamant::kernels::cuda {

void linear_tanh_gelu_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor pre_activation,
                              Tensor out, const LinearShape& shape, Workspace& workspace, const Stream& stream) {
  // As linear_forward, with GELU_AUX_BIAS: out = gelu(in weight^T + bias), aux = the sum.
  MatmulProblem problem;
  problem.transpose_b = Transpose::yes;
  problem.m = shape.rows;
  problem.n = shape.out_features;
  problem.k = shape.in_features;
  problem.a = {in.data, in.dtype, shape.in_features};
  problem.b = {weight.data, in.dtype, shape.in_features};
  problem.c = out.data;
  problem.c_dtype = out.dtype;
  problem.c_row_stride = shape.out_features;
  problem.epilogue = MatmulEpilogue::tanh_gelu_aux_bias;
  problem.bias = bias.data;
  problem.bias_dtype = bias.dtype;
  problem.aux = pre_activation.data;
  matmul(problem, workspace, stream);
}

void linear_tanh_dgelu_backward(const Tensor& d_out, const Tensor& weight, const Tensor& pre_activation,
                                Tensor d_pre_activation, const LinearShape& shape, Workspace& workspace,
                                const Stream& stream) {
  // As linear_backward's data gradient, with DGELU: d_in = (d_out weight) * gelu'(aux).
  MatmulProblem problem;
  problem.m = shape.rows;
  problem.n = shape.in_features;
  problem.k = shape.out_features;
  problem.a = {d_out.data, d_out.dtype, shape.out_features};
  problem.b = {weight.data, d_out.dtype, shape.in_features};
  problem.c = d_pre_activation.data;
  problem.c_dtype = d_pre_activation.dtype;
  problem.c_row_stride = shape.in_features;
  problem.epilogue = MatmulEpilogue::tanh_dgelu;
  problem.aux = pre_activation.data;  // read
  matmul(problem, workspace, stream);
}

}  // namespace adamant::kernels::cuda
