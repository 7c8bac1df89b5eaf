// The CUDA entry points for layernorm (kernels/layernorm.h) and its backward with the
// residual branch's gradient (kernels/residual_layernorm.h), called by their
// dispatchers with checked operands (bf16 activations and weights, fp32 mean/rstd
// and weight gradients, one GPU): make that GPU current, launch, and turn a failure into adamant::Error. Backward
// needs an fp32 workspace for its column sums; it is kept per (GPU, stream) and only
// grows, so after the first step of a shape no call allocates.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/residual_layernorm.h"

namespace adamant::kernels::cuda {

namespace {

const std::uint16_t* bits_of(const Tensor& t) { return static_cast<const std::uint16_t*>(t.data); }

CudaLaunch launch_for(const CudaLaunchGuard& guard, const Stream& stream, bool vectorized) {
  CudaLaunch launch;
  launch.stream = stream.handle();
  launch.multiprocessors = cuda_multiprocessor_count(guard.device_index());
  launch.vectorized = vectorized;
  return launch;
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream) {
  constexpr const char* kOp = "layernorm_forward";
  const CudaLaunchGuard guard(x.device, kOp);
  const CudaLaunch launch = launch_for(guard, stream, aligned_to(16, {&x, &weight, &bias, &out}));
  check_cuda_launch(
      launchers::layernorm_forward(bits_of(x), bits_of(weight), bits_of(bias), static_cast<float>(epsilon),
                                   static_cast<std::uint16_t*>(out.data), static_cast<float*>(mean.data),
                                   static_cast<float*>(rstd.data), shape.rows, shape.cols, launch),
      kOp);
}

void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        Workspace& workspace, const Stream& stream) {
  constexpr const char* kOp = "layernorm_backward";
  const CudaLaunchGuard guard(x.device, kOp);
  const CudaLaunch launch = launch_for(guard, stream, aligned_to(16, {&d_out, &x, &weight, &d_x}));
  float* column_sums = workspace.resources().layernorm_column_sums();
  check_cuda_launch(
      launchers::layernorm_backward(bits_of(d_out), bits_of(x), bits_of(weight), static_cast<const float*>(mean.data),
                                    static_cast<const float*>(rstd.data), static_cast<std::uint16_t*>(d_x.data),
                                    static_cast<float*>(d_weight.data), static_cast<float*>(d_bias.data), column_sums,
                                    shape.rows, shape.cols, launch),
      kOp);
}

void residual_layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                 const Tensor& rstd, Tensor d_residual, Tensor d_weight, Tensor d_bias,
                                 const BranchGrad& branch, const RowsShape& shape, Workspace& workspace,
                                 const Stream& stream) {
  constexpr const char* kOp = "residual_layernorm_backward";
  const CudaLaunchGuard guard(x.device, kOp);
  const CudaLaunch launch = launch_for(guard, stream, true);  // the dispatcher checked the alignment
  launchers::LayernormBranchGrad branch_grad;
  if (branch.dropout.probability > 0.0f) {
    branch_grad.d_branch = static_cast<std::uint16_t*>(branch.d_branch.data);
    branch_grad.dropout = detail::dropout_params(branch.dropout);
    branch_grad.rows_per_sample = branch.sample_numel / shape.cols;
  }
  branch_grad.d_bias = static_cast<float*>(branch.d_bias.data);
  check_cuda_launch(launchers::layernorm_backward(
                        bits_of(d_out), bits_of(x), bits_of(weight), static_cast<const float*>(mean.data),
                        static_cast<const float*>(rstd.data), static_cast<std::uint16_t*>(d_residual.data),
                        static_cast<float*>(d_weight.data), static_cast<float*>(d_bias.data),
                        workspace.resources().layernorm_column_sums(), shape.rows, shape.cols, launch, branch_grad),
                    kOp);
}

}  // namespace adamant::kernels::cuda
