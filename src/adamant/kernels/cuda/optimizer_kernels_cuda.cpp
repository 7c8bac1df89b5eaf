// The CUDA entry points of the optimizer kernels (adam.h, reduce.h, elementwise.h): turn Tensors into the plain
// launch arguments of launchers.h, make the data's GPU current, and turn launch
// failures into adamant::Error. The dispatchers in kernels/*.cpp have already
// checked sizes, dtypes and devices.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "adamant/core/cuda_check.h"
#include "adamant/kernels/adam.h"
#include "adamant/kernels/cuda/launchers.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"

namespace adamant::kernels::cuda {

namespace {

// Makes the data's GPU current for the launch and restores the caller's afterwards.
class CurrentDeviceGuard {
 public:
  explicit CurrentDeviceGuard(Device device) {
    ADAMANT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device.index) ADAMANT_CUDA_CHECK(cudaSetDevice(device.index));
    current_ = device.index;
  }
  ~CurrentDeviceGuard() {
    if (previous_ != current_) cudaSetDevice(previous_);
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int current_ = 0;
};

cudaStream_t stream_of(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

// True when `tensor` allows 4-element vector accesses (or is absent).
bool vector_aligned(const Tensor& tensor) {
  return tensor.data == nullptr || reinterpret_cast<std::uintptr_t>(tensor.data) % (4 * dtype_size(tensor.dtype)) == 0;
}

launchers::LaunchShape shape_for(Device device, std::initializer_list<const Tensor*> operands) {
  launchers::LaunchShape shape{};
  ADAMANT_CUDA_CHECK(cudaDeviceGetAttribute(&shape.multiprocessors, cudaDevAttrMultiProcessorCount, device.index));
  shape.vectorized = true;
  for (const Tensor* t : operands) shape.vectorized = shape.vectorized && vector_aligned(*t);
  return shape;
}

void check_status(cudaError_t status, const char* kernel) {
  if (status != cudaSuccess) {
    fail("CUDA kernel {} failed to launch: {} (error {})", kernel, cudaGetErrorString(status),
         static_cast<int>(status));
  }
}

int segment_count(const Tensor& segments, const char* kernel) {
  const std::size_t count = segments.numel() / 3;
  return static_cast<int>(count);
}

launchers::AdamConstants constants_of(const AdamArgs& args) {
  launchers::AdamConstants c{};
  c.lr = args.lr;
  c.beta1 = args.beta1;
  c.beta2 = args.beta2;
  c.one_minus_beta1 = 1.0f - args.beta1;
  c.one_minus_beta2 = 1.0f - args.beta2;
  c.eps = args.eps;
  c.weight_decay = args.weight_decay;
  // As the CPU reference: powers in double, rounded once to fp32.
  c.bias_correction1 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta1), static_cast<double>(args.step)));
  c.bias_correction2 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta2), static_cast<double>(args.step)));
  c.grad_scale = args.grad_scale;
  c.adamw = args.adamw;
  c.step_factor = args.step_factor.data != nullptr ? args.step_factor.ptr<float>() : nullptr;
  return c;
}

launchers::AdamOperands operands_of(const Tensor& segments, const Tensor& grad, const Tensor& exp_avg,
                                    const Tensor& exp_avg_sq, const Tensor& model_param) {
  launchers::AdamOperands ops{};
  ops.segments = static_cast<const std::int64_t*>(segments.data);
  ops.num_segments = segment_count(segments, "adam");
  ops.numel = static_cast<std::int64_t>(grad.numel());
  ops.grad = grad.data;
  ops.exp_avg = static_cast<float*>(exp_avg.data);
  ops.exp_avg_sq = static_cast<float*>(exp_avg_sq.data);
  ops.model_param = model_param.data;
  return ops;
}

launchers::ModelCopy model_copy_of(const Tensor& model_param) {
  if (model_param.data == nullptr) return launchers::ModelCopy::none;
  switch (model_param.dtype) {
    case DType::bf16:
      return launchers::ModelCopy::bf16;
    case DType::f16:
      return launchers::ModelCopy::f16;
    case DType::f32:
      return launchers::ModelCopy::f32;
    default:
      fail("adam: model weight copy of {}; expected bf16, fp16 or fp32", dtype_name(model_param.dtype));
  }
}

}  // namespace

void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param, const Stream& stream) {
  const CurrentDeviceGuard guard(grad.device);
  launchers::AdamOperands ops = operands_of(segments, grad, exp_avg, exp_avg_sq, model_param);
  ops.main_param = static_cast<float*>(main_param.data);
  const auto shape = shape_for(grad.device, {&grad, &main_param, &exp_avg, &exp_avg_sq, &model_param});
  check_status(
      launchers::adam(ops, grad.dtype, model_copy_of(model_param), false, constants_of(args), shape, stream_of(stream)),
      "adam");
}

void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream, int sm_count) {
  const CurrentDeviceGuard guard(grad.device);
  launchers::AdamOperands ops = operands_of(segments, grad, exp_avg, exp_avg_sq, model_param);
  ops.remainder = static_cast<std::uint16_t*>(remainder.data);
  // Bulk copies move whole 16-byte units from 16-byte aligned addresses.
  if (sm_count > 0 && aligned_to(16, {&grad, &remainder, &exp_avg, &exp_avg_sq, &model_param})) {
    check_status(launchers::adam_bulk(ops, grad.dtype, constants_of(args), sm_count, stream_of(stream)),
                 "adam (param remainders, bulk copies)");
    return;
  }
  const auto shape = shape_for(grad.device, {&grad, &remainder, &exp_avg, &exp_avg_sq, &model_param});
  check_status(
      launchers::adam(ops, grad.dtype, launchers::ModelCopy::bf16, true, constants_of(args), shape, stream_of(stream)),
      "adam (param remainders)");
}

void resolve_step_factor(const Tensor& squared_norm, const StepFactorInputs& inputs, Tensor factor,
                         const Stream& stream) {
  const CurrentDeviceGuard guard(factor.device);
  check_status(
      launchers::resolve_step_factor(squared_norm.ptr<double>(), inputs, factor.ptr<float>(), stream_of(stream)),
      "resolve_step_factor");
}

void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, Workspace& workspace,
                  const Stream& stream) {
  const CurrentDeviceGuard guard(out.device);
  const auto numel = static_cast<std::int64_t>(x.numel());
  double* partials = workspace.resources().squared_norm_partials();
  // The reduction reads 16-byte groups of any element type.
  launchers::LaunchShape shape = shape_for(out.device, {&x});
  shape.vectorized = reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0;
  check_status(launchers::squared_norm(x.data, x.dtype, numel, static_cast<const std::int64_t*>(segments.data),
                                       segment_count(segments, "squared_norm"), partials,
                                       static_cast<double*>(out.data), accumulate, shape, stream_of(stream)),
               "squared_norm");
}

void cast(const Tensor& src, Tensor dst, const Stream& stream) {
  const CurrentDeviceGuard guard(src.device);
  check_status(launchers::cast(src.data, src.dtype, dst.data, dst.dtype, static_cast<std::int64_t>(src.numel()),
                               shape_for(src.device, {&src, &dst}), stream_of(stream)),
               "cast");
}

void fill_zero(Tensor x, const Stream& stream) {
  if (x.numel() == 0) return;
  const CurrentDeviceGuard guard(x.device);
  ADAMANT_CUDA_CHECK(cudaMemsetAsync(x.data, 0, x.bytes(), stream_of(stream)));
}

void scale(Tensor x, float s, const Stream& stream) {
  const CurrentDeviceGuard guard(x.device);
  check_status(launchers::scale(x.data, x.dtype, s, static_cast<std::int64_t>(x.numel()), shape_for(x.device, {&x}),
                                stream_of(stream)),
               "scale");
}

void accumulate(const Tensor& src, Tensor dst, const Stream& stream) {
  const CurrentDeviceGuard guard(src.device);
  check_status(launchers::accumulate(src.data, src.dtype, dst.data, dst.dtype, static_cast<std::int64_t>(src.numel()),
                                     shape_for(src.device, {&src, &dst}), stream_of(stream)),
               "accumulate");
}

}  // namespace adamant::kernels::cuda
