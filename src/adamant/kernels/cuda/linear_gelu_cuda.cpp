// The up projection and tanh GELU in one cuBLASLt product (kernels/linear_gelu.h).
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/cuda/linear_problems.h"
#include "adamant/kernels/linear_gelu.h"

namespace adamant::kernels::cuda {

void linear_tanh_gelu_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor pre_activation,
                              Tensor out, const LinearShape& shape, Workspace& workspace, const Stream& stream) {
  // As linear_forward, with GELU_AUX_BIAS: out = gelu(in weight^T + bias), aux = the sum.
  MatmulProblem problem = linear_forward_problem(in, weight, out, shape);
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
  MatmulProblem problem = linear_data_grad_problem(d_out, weight, d_pre_activation, shape);
  problem.epilogue = MatmulEpilogue::tanh_dgelu;
  problem.aux = pre_activation.data;  // read
  matmul(problem, workspace, stream);
}

}  // namespace adamant::kernels::cuda
