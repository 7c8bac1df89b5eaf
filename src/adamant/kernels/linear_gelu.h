#pragma once
// The MLP's up projection and GELU as one call, forward and backward (NeMo's
// model.bias_activation_fusion): on the GPU, the tanh form runs inside the cuBLASLt
// product's epilogue, GELU_AUX_BIAS forward and DGELU backward, so that the pre-activations
// are not read back by a GELU kernel. The epilogue applies GELU to the fp32 sum before
// rounding where the separate kernels round the pre-activation first: the two differ in the
// last bit of some outputs. The exact form, which cuBLASLt has no epilogue for, and the CPU
// run the product and the GELU kernels one after the other.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/linear.h"

namespace adamant::kernels {

namespace cuda {
void linear_tanh_gelu_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor pre_activation,
                              Tensor out, const LinearShape& shape, Workspace& workspace, const Stream& stream);
void linear_tanh_dgelu_backward(const Tensor& d_out, const Tensor& weight, const Tensor& pre_activation,
                                Tensor d_pre_activation, const LinearShape& shape, Workspace& workspace,
                                const Stream& stream);
}  // namespace cuda

// pre_activation = in * weight^T + bias and out = gelu(pre_activation), both [rows,
// out_features]. `workspace`: made with WorkspaceNeeds::matmul for `stream`.
inline void linear_gelu_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor pre_activation,
                                Tensor out, const LinearShape& shape, GeluForm form, Workspace& workspace,
                                const Stream& stream) {
  const std::int64_t outputs = shape.rows * shape.out_features;
  if (form == GeluForm::exact) {
    linear_forward(in, weight, bias, pre_activation, shape, workspace, stream);
    gelu_forward(pre_activation, out, outputs, form, stream);
    return;
  }
  const KernelCall call = KernelCall::model("linear_gelu_forward", out, stream);
  call.uses_matmul(workspace);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  call.exact("in", in, shape.rows * shape.in_features, Role::activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  call.exact("bias", bias, shape.out_features, Role::weight);
  call.exact("pre_activation", pre_activation, outputs, Role::activation);
  call.exact("out", out, outputs, Role::activation);
  call.run(
      [&] {
        cpu::linear_forward(in, weight, bias, pre_activation, shape);
        cpu::gelu_forward(pre_activation, out, outputs, form);
      },
      ADAMANT_CUDA_CALL(
          cuda::linear_tanh_gelu_forward(in, weight, bias, pre_activation, out, shape, workspace, stream)));
}

// d_pre_activation = (d_out * weight) * gelu'(pre_activation): the data gradient of the layer
// after the GELU, taken back through the GELU. d_out [rows, out_features] is that layer's
// output gradient, weight its [out_features, in_features], pre_activation [rows,
// in_features]. The bias gradient of the layer before is left to the caller (bias_grad).
inline void linear_dgelu_backward(const Tensor& d_out, const Tensor& weight, const Tensor& pre_activation,
                                  Tensor d_pre_activation, const LinearShape& shape, GeluForm form,
                                  Workspace& workspace, const Stream& stream) {
  const std::int64_t inputs = shape.rows * shape.in_features;
  if (form == GeluForm::exact) {
    linear_backward(d_out, {}, weight, d_pre_activation, {}, {}, shape, workspace, stream);
    gelu_backward(d_pre_activation, pre_activation, d_pre_activation, inputs, form, stream);
    return;
  }
  const KernelCall call = KernelCall::model("linear_dgelu_backward", d_out, stream);
  call.uses_matmul(workspace);
  call.positive("in_features", shape.in_features);
  call.positive("out_features", shape.out_features);
  call.exact("d_out", d_out, shape.rows * shape.out_features, Role::activation);
  call.exact("weight", weight, shape.out_features * shape.in_features, Role::weight);
  call.exact("pre_activation", pre_activation, inputs, Role::activation);
  call.exact("d_pre_activation", d_pre_activation, inputs, Role::activation);
  call.run(
      [&] {
        cpu::linear_backward(d_out, {}, weight, d_pre_activation, {}, {}, shape, WeightGrad::overwrite, {});
        cpu::gelu_backward(d_pre_activation, pre_activation, d_pre_activation, {}, inputs, form);
      },
      ADAMANT_CUDA_CALL(
          cuda::linear_tanh_dgelu_backward(d_out, weight, pre_activation, d_pre_activation, shape, workspace, stream)));
}

}  // namespace adamant::kernels
