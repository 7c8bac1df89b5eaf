// The CUDA GEMM and linear layer (kernels/gemm.h, linear.h) on cuBLASLt, called by their
// dispatchers with checked operands: the bias (if any) is added in the forward GEMM's
// epilogue, and the bias gradient (if asked for) comes from a column-sum kernel of ours on
// the same stream.
#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/cuda/cublaslt_matmul.h"
#include "adamant/kernels/cuda/linear_problems.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels::cuda {

ColumnSumsOut column_sums_out(const BiasGradOut& bias) {
  ColumnSumsOut out;
  if (bias.d_bias.data == nullptr) return out;
  // cuBLASLt's workspace of the stream, as for linear_backward's own column sums: the
  // stream orders the kernel that uses it between the GEMMs that do.
  const DeviceScratch scratch = bias.workspace->resources().matmul().scratch();
  out.sums = static_cast<float*>(bias.d_bias.data);
  out.columns = bias.columns;
  out.scratch = static_cast<float*>(scratch.data);
  out.scratch_floats = static_cast<std::int64_t>(scratch.bytes / sizeof(float));
  return out;
}

void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c, Workspace& workspace, const Stream& stream) {
  MatmulProblem problem = matmul_problem(transpose_a, transpose_b, m, n, k, a, b, c);
  problem.alpha = static_cast<float>(alpha);
  problem.beta = static_cast<float>(beta);
  matmul(problem, workspace, stream);
}

void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    Workspace& workspace, const Stream& stream) {
  // out = in weight^T + bias: the bias epilogue adds bias[j] to every row, reading out
  // only once. Without a bias, the default epilogue.
  MatmulProblem problem = linear_forward_problem(in, weight, out, shape);
  if (bias.data != nullptr) {
    problem.epilogue = MatmulEpilogue::add_bias;
    problem.bias = bias.data;
    problem.bias_dtype = bias.dtype;
  }
  matmul(problem, workspace, stream);
}

void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, Workspace& workspace, const Stream& stream,
                     WeightGrad weight_grad) {
  if (d_in.data != nullptr) matmul(linear_data_grad_problem(d_out, weight, d_in, shape), workspace, stream);
  if (d_weight.data == nullptr) return;
  MatmulProblem product = linear_weight_grad_problem(d_out, in, d_weight, shape);
  product.beta = weight_grad == WeightGrad::accumulate ? 1.0f : 0.0f;
  matmul(product, workspace, stream);
  if (d_bias.data != nullptr) cuda::bias_grad(d_out, d_bias, shape.rows, shape.out_features, workspace, stream);
}

// By our column sums rather than cuBLASLt's BGRADB epilogue, which runs as a separate,
// slower kernel of its own.
void bias_grad(const Tensor& d_out, Tensor d_bias, std::int64_t rows, std::int64_t cols, Workspace& workspace,
               const Stream& stream) {
  const ColumnSumsOut sums = column_sums_out({d_bias, cols, &workspace});
  const cudaError_t status = launchers::column_sums(d_out.data, d_out.dtype, rows, cols, sums.scratch,
                                                    sums.scratch_floats, sums.sums, stream_handle(stream));
  ADAMANT_CHECK(status == cudaSuccess, "bias_grad: the column sums failed to launch: {} ({})",
                cudaGetErrorString(status), static_cast<int>(status));
}

}  // namespace adamant::kernels::cuda
