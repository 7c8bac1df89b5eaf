#pragma once
// The seam of a pre-LN block: the residual stream plus a dropped-out branch, and the
// layer normalisation of that sum that the next sublayer reads. On a GPU one kernel
// makes both, reading the stream and the branch once and writing the sum and the
// normalised rows (three kernels and two more passes over the rows otherwise); the CPU,
// and shapes that kernel does not take, run the three kernels it stands for. Backward
// alike: the layernorm backward's kernel also makes the branch's gradient (its dropout
// and its bias's column sums) from the stream's gradient while it is in cache.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/residual.h"

namespace adamant::kernels {

// A residual branch and its dropout, whose elements are numbered as dropout() numbers
// them: samples of sample_numel elements, the rows starting at dropout.first_element.
struct DroppedBranch {
  Tensor values;
  DropoutArgs dropout;
  std::int64_t sample_numel = 0;
};

// A layer normalisation's learned scale and shift and its epsilon.
struct LayernormParams {
  Tensor weight;
  Tensor bias;
  double epsilon = 1e-5;
};

// The gradient that a residual branch gets where it joins the stream (the backward of
// residual_layernorm_forward's residual = x + dropout(branch)): the dropout of the stream's
// gradient, its elements numbered as the forward's branch, and the gradient of the bias of
// the layer that made the branch (the column sums of the branch's gradient).
struct BranchGrad {
  Tensor d_branch;  // the dropout's output; unused without dropout, where the branch's gradient is the stream's
  DropoutArgs dropout;
  std::int64_t sample_numel = 0;
  Tensor d_bias;  // empty: none
};

namespace detail {

// Whether the GPU kernels of the seam take rows of `shape` whose dropout elements are
// numbered from `dropout` in samples of sample_numel: rows of whole 16-byte vectors, each
// inside one sample, the first at a row's start (the operands' alignment aside).
inline bool seam_rows(const RowsShape& shape, const DropoutArgs& dropout, std::int64_t sample_numel) {
  return shape.cols % 8 == 0 && sample_numel % shape.cols == 0 &&
         dropout.first_element % static_cast<std::uint64_t>(shape.cols) == 0;
}

}  // namespace detail

// Launcher in kernels/cuda/layernorm.cu (bf16 bit patterns); returns its cudaError_t. Rows
// of whole 16-byte vectors, every operand 16-byte aligned, each row inside one sample of
// rows_per_sample rows, params.first_element a multiple of cols.
namespace cuda {
void residual_layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                 const Tensor& rstd, Tensor d_residual, Tensor d_weight, Tensor d_bias,
                                 const BranchGrad& branch, const RowsShape& shape, Workspace& workspace,
                                 const Stream& stream);
int residual_layernorm_forward(const std::uint16_t* x, const std::uint16_t* branch, std::uint16_t* residual,
                               const std::uint16_t* weight, const std::uint16_t* bias, float epsilon,
                               std::uint16_t* out, float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                               std::int64_t rows_per_sample, const DropoutParams& params, const CudaLaunch& launch);
}  // namespace cuda

// residual = x + dropout(branch) and out, mean, rstd = layernorm(residual): the values of
//   dropout(branch.values, residual, ...); residual_add(x, residual, residual, ...);
//   layernorm_forward(residual, ...);
// bit for bit on both backends (the GPU rounds the dropped branch and the sum to bf16 as
// those kernels store them). residual may alias the branch, not x.
inline void residual_layernorm_forward(const Tensor& x, const DroppedBranch& branch, Tensor residual,
                                       const LayernormParams& norm, Tensor out, Tensor mean, Tensor rstd,
                                       const RowsShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("residual_layernorm_forward", x, stream);
  call.positive("cols", shape.cols);
  call.non_negative("rows", shape.rows);
  const std::int64_t numel = shape.rows * shape.cols;
  detail::check_dropout_range(call, branch.dropout, numel, branch.sample_numel);
  call.exact("x", x, numel, Role::activation);
  call.exact("branch", branch.values, numel, Role::activation);
  call.exact("residual", residual, numel, Role::activation);
  ADAMANT_CHECK(numel == 0 || residual.data != x.data,
                "residual_layernorm_forward: residual is x's memory; the dropped branch is written there before x is "
                "read, so give residual the branch's memory or memory of its own");
  auto three_kernels = [&] {
    dropout(branch.values, residual, numel, branch.sample_numel, branch.dropout, stream);
    residual_add(x, residual, residual, numel, stream);
    layernorm_forward(residual, norm.weight, norm.bias, norm.epsilon, out, mean, rstd, shape, stream);
  };
  const bool fusable = detail::seam_rows(shape, branch.dropout, branch.sample_numel) &&
                       aligned_to(16, {&x, &branch.values, &residual, &norm.weight, &norm.bias, &out});
  if (call.on_cuda() && !fusable) {
    three_kernels();
    return;
  }
  call.exact("weight", norm.weight, shape.cols, Role::weight);
  call.exact("bias", norm.bias, shape.cols, Role::weight);
  call.exact("out", out, numel, Role::activation);
  call.exact("mean", mean, shape.rows, Role::statistic);
  call.exact("rstd", rstd, shape.rows, Role::statistic);
  ADAMANT_CHECK(norm.epsilon > 0.0, "residual_layernorm_forward: epsilon {} must be positive", norm.epsilon);
  call.run(three_kernels, ADAMANT_CUDA_CALL(cuda::residual_layernorm_forward(
                              bits16_of(x), bits16_of(branch.values), bits16_of(residual), bits16_of(norm.weight),
                              bits16_of(norm.bias), static_cast<float>(norm.epsilon), bits16_of(out),
                              static_cast<float*>(mean.data), static_cast<float*>(rstd.data), shape.rows, shape.cols,
                              branch.sample_numel / shape.cols, detail::dropout_params(branch.dropout), launch)));
}

// d_residual += the layernorm's input gradient (d_weight and d_bias overwritten), then the
// gradient of the branch that joins the stream below it, from d_residual as stored:
//   layernorm_backward(d_out, x, weight, mean, rstd, d_residual, d_weight, d_bias, ...);
//   dropout(d_residual, branch.d_branch, ..., {branch.d_bias, cols}) with dropout, or
//   bias_grad(d_residual, branch.d_bias, ...) without;
// the same values on both backends, the bias gradient's sums in another order on the GPU,
// where one kernel makes it all for rows of 16-byte vectors (the branch's gradient from
// d_residual while it is in cache). `workspace` as for layernorm_backward and bias_grad.
inline void residual_layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd, Tensor d_residual, Tensor d_weight, Tensor d_bias,
                                        const BranchGrad& branch, const RowsShape& shape, Workspace& workspace,
                                        const Stream& stream) {
  const KernelCall call = KernelCall::model("residual_layernorm_backward", x, stream);
  call.positive("cols", shape.cols);
  call.non_negative("rows", shape.rows);
  const std::int64_t numel = shape.rows * shape.cols;
  const bool dropped = branch.dropout.probability > 0.0f;
  const bool summing = branch.d_bias.data != nullptr;
  detail::check_dropout_range(call, branch.dropout, numel, branch.sample_numel);
  if (dropped) {
    call.exact("d_branch", branch.d_branch, numel, Role::activation);
    ADAMANT_CHECK(numel == 0 || branch.d_branch.data != d_residual.data,
                  "residual_layernorm_backward: d_branch is d_residual's memory, which still holds the stream's "
                  "gradient that the layers below need; give the dropped branch's gradient memory of its own");
  }
  auto in_steps = [&] {
    layernorm_backward(d_out, x, weight, mean, rstd, d_residual, d_weight, d_bias, shape, workspace, stream);
    if (dropped) {
      dropout(d_residual, branch.d_branch, numel, branch.sample_numel, branch.dropout, stream,
              {branch.d_bias, shape.cols, &workspace});
    } else if (summing) {
      bias_grad(d_residual, branch.d_bias, shape.rows, shape.cols, workspace, stream);
    }
  };
  const bool fusable = detail::seam_rows(shape, branch.dropout, branch.sample_numel) &&
                       aligned_to(16, {&d_out, &x, &weight, &d_residual}) &&
                       (!dropped || aligned_to(16, {&branch.d_branch}));
  if (!call.on_cuda() || !fusable || shape.rows == 0) {
    in_steps();
    return;
  }
  detail::check_layernorm_backward(call, d_out, x, weight, mean, rstd, d_residual, d_weight, d_bias, shape, workspace);
  if (summing) call.exact("branch d_bias", branch.d_bias, shape.cols, Role::weight_grad);
  call.run(in_steps,
           ADAMANT_CUDA_CALL(cuda::residual_layernorm_backward(d_out, x, weight, mean, rstd, d_residual, d_weight,
                                                               d_bias, branch, shape, workspace, stream)));
}

}  // namespace adamant::kernels
