#pragma once
// A fully connected layer with an optional bias, Megatron's weight layout [out_features, in_features].
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

struct LinearShape {
  std::int64_t rows = 0;  // tokens
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
};

enum class WeightGrad : std::uint8_t {
  overwrite,
  accumulate,  // d_weight += d_out^T * in, by the GEMM itself (beta = 1): no separate pass
};

class Workspace;

// A linear layer's bias gradient summed by the kernel that writes the layer's output
// gradient (gelu_backward, dropout), as it writes it, instead of by linear_backward, which
// would read that gradient again: d_bias[j] = the sum over rows of column j of the
// gradient, `columns` per row.
struct BiasGradOut {
  Tensor d_bias;  // empty: none
  std::int64_t columns = 0;
  Workspace* workspace = nullptr;  // for the call's stream, WorkspaceNeeds::matmul: scratch for partial sums
};

namespace cpu {
// d_bias[j] = sum over the rows of d_out [rows, cols] of column j, each column in row order.
void bias_grad(const Tensor& d_out, Tensor d_bias, std::int64_t rows, std::int64_t cols);
void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape);
// With WeightGrad::accumulate, `product` (at least out_features x in_features of d_weight's
// dtype) holds the weight gradient before it is added.
void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, WeightGrad weight_grad, const Tensor& product);
}  // namespace cpu

namespace cuda {
// Where a CUDA kernel that writes a bias's gradient puts its column sums (and their scratch).
ColumnSumsOut column_sums_out(const BiasGradOut& bias);
void bias_grad(const Tensor& d_out, Tensor d_bias, std::int64_t rows, std::int64_t cols, Workspace& workspace,
               const Stream& stream);
void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    Workspace& workspace, const Stream& stream);
void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, Workspace& workspace, const Stream& stream,
                     WeightGrad weight_grad);
}  // namespace cuda

// out[rows, out] = in[rows, in] * weight^T + bias. An empty bias (data == nullptr) adds
// none (a row-parallel layer whose bias only one tensor-parallel rank adds). `workspace`:
// made with WorkspaceNeeds::matmul for `stream`, as for linear_backward.
inline void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out,
                           const LinearShape& shape, Workspace& workspace, const Stream& stream) {
  const KernelCall call = KernelCall::model("linear_forward", out, stream);
  call.uses_matmul(workspace);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  call.exact("in", in, shape.rows * shape.in_features, Role::activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  if (bias.data != nullptr) call.exact("bias", bias, shape.out_features, Role::weight);
  call.exact("out", out, shape.rows * shape.out_features, Role::activation);
  call.run([&] { cpu::linear_forward(in, weight, bias, out, shape); },
           ADAMANT_CUDA_CALL(cuda::linear_forward(in, weight, bias, out, shape, workspace, stream)));
}

// Checks `bias` for a kernel call that writes `numel` outputs and sums their columns into it
// (gelu_backward, dropout); returns whether it asks for a bias gradient at all.
inline bool check_bias_grad_out(const KernelCall& call, const BiasGradOut& bias, std::int64_t numel) {
  if (bias.d_bias.data == nullptr) return false;
  call.positive("bias columns", bias.columns);
  ADAMANT_CHECK(numel % bias.columns == 0, "{}: {} elements are not whole rows of the bias's {} columns", call.op(),
                numel, bias.columns);
  call.exact("d_bias", bias.d_bias, bias.columns, Role::weight_grad);
  ADAMANT_CHECK(bias.workspace != nullptr, "{}: a bias gradient needs the stream's workspace", call.op());
  call.uses_matmul(*bias.workspace);
  return true;
}

// d_bias[j] = sum over the rows of d_out [rows, cols] of column j: a bias gradient on its own,
// where no kernel sums it on the way. `workspace`: made with WorkspaceNeeds::matmul for `stream`.
inline void bias_grad(const Tensor& d_out, Tensor d_bias, std::int64_t rows, std::int64_t cols, Workspace& workspace,
                      const Stream& stream) {
  const KernelCall call = KernelCall::model("bias_grad", d_out, stream);
  call.uses_matmul(workspace);
  call.non_negative("rows", rows);
  call.positive("cols", cols);
  call.exact("d_out", d_out, rows * cols, Role::activation);
  call.exact("d_bias", d_bias, cols, Role::weight_grad);
  call.run([&] { cpu::bias_grad(d_out, d_bias, rows, cols); },
           ADAMANT_CUDA_CALL(cuda::bias_grad(d_out, d_bias, rows, cols, workspace, stream)));
}

// What the weight gradient does with d_weight's old contents.
// d_in = d_out * weight, d_weight = d_out^T * in (or += with WeightGrad::accumulate), d_bias
// = column sums of d_out; d_in and d_bias overwritten. An empty d_in, d_weight or d_bias
// (data == nullptr) skips that result, so the data gradient and the parameter gradients can
// be two calls with other work between them (`in` is read only for d_weight). d_bias comes
// with d_weight: the parameter gradients are one call. Adding to d_weight takes a workspace
// made with WorkspaceNeeds::weight_grad_elements of at least out_features x in_features.
inline void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                            Tensor d_bias, const LinearShape& shape, Workspace& workspace, const Stream& stream,
                            WeightGrad weight_grad = WeightGrad::overwrite) {
  const KernelCall call = KernelCall::model("linear_backward", d_out, stream);
  call.uses_matmul(workspace);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  call.exact("d_out", d_out, shape.rows * shape.out_features, Role::activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  if (d_in.data != nullptr) call.exact("d_in", d_in, shape.rows * shape.in_features, Role::activation);
  if (d_weight.data != nullptr) {
    call.exact("in", in, shape.rows * shape.in_features, Role::activation);
    call.exact("d_weight", d_weight, shape.out_features * shape.in_features, Role::buffer_grad);
  }
  if (d_bias.data != nullptr) {
    ADAMANT_CHECK(d_weight.data != nullptr,
                  "linear_backward: d_bias without d_weight (the bias gradient comes with it)");
    call.exact("d_bias", d_bias, shape.out_features, Role::weight_grad);
  }
  const std::int64_t weight_numel = shape.out_features * shape.in_features;
  if (d_weight.data != nullptr && weight_grad == WeightGrad::accumulate) {
    ADAMANT_CHECK(workspace.needs().weight_grad_elements >= weight_numel,
                  "linear_backward: adding to a {} x {} weight gradient takes a workspace made with "
                  "WorkspaceNeeds::weight_grad_elements of at least {}; this one has {}",
                  shape.out_features, shape.in_features, weight_numel, workspace.needs().weight_grad_elements);
  }
  call.run(
      [&] {
        cpu::linear_backward(
            d_out, in, weight, d_in, d_weight, d_bias, shape, weight_grad,
            weight_grad == WeightGrad::accumulate ? workspace.weight_grad_scratch(d_weight.dtype) : Tensor{});
      },
      ADAMANT_CUDA_CALL(
          cuda::linear_backward(d_out, in, weight, d_in, d_weight, d_bias, shape, workspace, stream, weight_grad)));
}

}  // namespace adamant::kernels
