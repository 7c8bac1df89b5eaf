#pragma once
// Layer normalisation over the last dimension with a learned scale and shift.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

struct RowsShape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

namespace cpu {
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape);
void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape);
}  // namespace cpu

namespace cuda {
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream);
void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        Workspace& workspace, const Stream& stream);
}  // namespace cuda

// Per row of x [rows, cols]: mean, rstd = 1 / sqrt(biased variance + epsilon),
// out = (x - mean) * rstd * weight + bias. mean and rstd [rows] are kept for backward.
inline void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                              Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream) {
  const KernelCall call = KernelCall::model("layernorm_forward", x, stream);
  call.positive("cols", shape.cols);
  ADAMANT_CHECK(epsilon > 0.0, "layernorm_forward: epsilon {} must be positive", epsilon);
  call.exact("x", x, shape.rows * shape.cols, Role::activation);
  call.exact("weight", weight, shape.cols, Role::weight);
  call.exact("bias", bias, shape.cols, Role::weight);
  call.exact("out", out, shape.rows * shape.cols, Role::activation);
  call.exact("mean", mean, shape.rows, Role::statistic);
  call.exact("rstd", rstd, shape.rows, Role::statistic);
  call.run([&] { cpu::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape); },
           ADAMANT_CUDA_CALL(cuda::layernorm_forward(x, weight, bias, epsilon, out, mean, rstd, shape, stream)));
}

namespace detail {

// The operands of a layernorm backward of `shape` (layernorm_backward's).
inline void check_layernorm_backward(const KernelCall& call, const Tensor& d_out, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, const Tensor& d_x, const Tensor& d_weight,
                                     const Tensor& d_bias, const RowsShape& shape, const Workspace& workspace) {
  call.positive("cols", shape.cols);
  call.uses(workspace);
  ADAMANT_CHECK(shape.rows <= workspace.needs().layernorm_rows && shape.cols <= workspace.needs().layernorm_cols,
                "{}: {} x {} rows and columns, but the workspace was made for at most {} x {}; make it with "
                "WorkspaceNeeds::layernorm_rows and layernorm_cols that cover every layernorm it runs",
                call.op(), shape.rows, shape.cols, workspace.needs().layernorm_rows, workspace.needs().layernorm_cols);
  call.exact("d_out", d_out, shape.rows * shape.cols, Role::activation);
  call.exact("x", x, shape.rows * shape.cols, Role::activation);
  call.exact("weight", weight, shape.cols, Role::weight);
  call.exact("mean", mean, shape.rows, Role::statistic);
  call.exact("rstd", rstd, shape.rows, Role::statistic);
  call.exact("d_x", d_x, shape.rows * shape.cols, Role::activation);
  call.exact("d_weight", d_weight, shape.cols, Role::weight_grad);
  call.exact("d_bias", d_bias, shape.cols, Role::weight_grad);
}

}  // namespace detail

// d_x += dL/dx (accumulates: in a pre-LN block it is the residual stream's gradient);
// d_weight and d_bias are overwritten. `workspace` holds the column sums of shapes up to
// its WorkspaceNeeds::layernorm_rows x layernorm_cols.
inline void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                               Workspace& workspace, const Stream& stream) {
  const KernelCall call = KernelCall::model("layernorm_backward", x, stream);
  detail::check_layernorm_backward(call, d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape, workspace);
  call.run([&] { cpu::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape); },
           ADAMANT_CUDA_CALL(cuda::layernorm_backward(d_out, x, weight, mean, rstd, d_x, d_weight, d_bias, shape,
                                                      workspace, stream)));
}

}  // namespace adamant::kernels
