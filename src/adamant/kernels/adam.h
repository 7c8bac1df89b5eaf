#pragma once
// Multi-tensor fused Adam over one flat shard (docs/distributed_fused_adam.md, "A step"). CPU reference
// in kernels/cpu/, CUDA in kernels/cuda/; both take the same arguments.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#include "adamant/kernels/step_factor.h"

namespace adamant::kernels {

struct AdamArgs {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // applied only to segments whose decay flag is 1
  bool adamw = true;          // decoupled decay; false = L2 (wd*p added to the gradient)
  std::int64_t step = 1;      // 1-based, for the bias corrections
  float grad_scale = 1.0f;    // every gradient is multiplied by this first (averaging, unscale, clip)
  // Or, where set, that factor as resolve_step_factor left it on the gradients' device (f32 [2]:
  // grad scale, skip), read by the kernel itself; a skip other than 0 leaves every operand
  // untouched. Adam can then be queued before the host knows the gradients' norm.
  Tensor step_factor;
};

// The factor of AdamArgs::step_factor from the squared norm of the synced gradient (f64 [1], as
// squared_norm leaves it): factor = [step_factor_of(...).adam_grad_scale, 1 where the norm is
// not finite else 0], f32 [2] on the norm's device.
void resolve_step_factor(const Tensor& squared_norm, const StepFactorInputs& inputs, Tensor factor,
                         const Stream& stream);

// Segments: an i64 tensor of 3*k values (begin, end, decay) on the shard's device,
// sorted, non-overlapping, element offsets within the shard. Elements outside
// every segment (padding) are left untouched.
//
// Per element in a segment, in fp32:
//   g = grad * grad_scale; if (!adamw) g += wd*p
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//   denom = sqrt(v / (1 - b2^step)) + eps
//   u = (m / (1 - b1^step)) / denom;  if (adamw) u += wd*p
//   p -= lr*u;  model_param = round(p)
// The bf16 model copy is rounded half away from zero on the fp32 bit pattern
// (bf16_round_for_remainder) so stored remainders reproduce p exactly; fp16 rounds to nearest even.

namespace cpu {
void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param);
void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param);
void resolve_step_factor(const Tensor& squared_norm, const StepFactorInputs& inputs, Tensor factor);
}  // namespace cpu

namespace cuda {
void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param, const Stream& stream);
void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream, int sm_count);
void resolve_step_factor(const Tensor& squared_norm, const StepFactorInputs& inputs, Tensor factor,
                         const Stream& stream);
}  // namespace cuda

namespace detail {

inline void check_adam_operands(const KernelCall& call, const AdamArgs& args, const Tensor& segments,
                                const Tensor& grad, const Tensor& state, const Tensor& exp_avg,
                                const Tensor& exp_avg_sq, const Tensor& model_param) {
  const auto n = static_cast<std::int64_t>(grad.numel());
  check_segments(call, segments);
  ADAMANT_CHECK(args.step >= 1, "adam: step {} (the bias corrections need a 1-based step count)", args.step);
  ADAMANT_CHECK(grad.dtype == DType::f32 || grad.dtype == DType::bf16, "adam: gradient of {} (fp32 or bf16 expected)",
                dtype_name(grad.dtype));
  call.same_device("param", state);
  ADAMANT_CHECK(static_cast<std::int64_t>(state.numel()) == n, "adam: param has {} elements, the gradient {}",
                state.numel(), n);
  call.exact("exp_avg", exp_avg, n, DType::f32);
  call.exact("exp_avg_sq", exp_avg_sq, n, DType::f32);
  if (args.step_factor.data != nullptr) call.exact("step_factor", args.step_factor, 2, DType::f32);
  if (model_param.data != nullptr) {
    ADAMANT_CHECK(is_float(model_param.dtype), "adam: model weight copy of {} (fp32, bf16 or fp16 expected)",
                  dtype_name(model_param.dtype));
    call.exact("model_param", model_param, n, model_param.dtype);
  }
}

}  // namespace detail

// main_param, exp_avg, exp_avg_sq: fp32. grad: fp32 or bf16. model_param: bf16, fp16 or fp32 copy
// to write, or an empty Tensor (data == nullptr) when main_param is the model weight itself.
inline void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param,
                      Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream) {
  const KernelCall call("adam", grad, stream);
  detail::check_adam_operands(call, args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param);
  ADAMANT_CHECK(main_param.dtype == DType::f32, "adam: main weights must be fp32");
  call.run(
      [&] { cpu::adam_step(args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param); },
      ADAMANT_CUDA_CALL(cuda::adam_step(args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param, stream)));
}

// store_param_remainders: the fp32 main weight is (model_param bf16 high half, remainder low half).
// remainder: u16 (a signed 16-bit offset); model_param: bf16, read and written.
// sm_count > 0 runs the update on that many SMs only (on a GPU, operands 16-byte aligned; the
// same bits), so that other kernels can run beside it on the rest.
inline void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                                Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream,
                                int sm_count = 0) {
  const KernelCall call("adam", grad, stream);
  detail::check_adam_operands(call, args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param);
  ADAMANT_CHECK(remainder.dtype == DType::u16 && model_param.dtype == DType::bf16,
                "adam: remainders need u16 remainders and bf16 weights");
  call.run([&] { cpu::adam_step_remainder(args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param); },
           ADAMANT_CUDA_CALL(cuda::adam_step_remainder(args, segments, grad, remainder, exp_avg, exp_avg_sq,
                                                       model_param, stream, sm_count)));
}

inline void resolve_step_factor(const Tensor& squared_norm, const StepFactorInputs& inputs, Tensor factor,
                                const Stream& stream) {
  const KernelCall call("resolve_step_factor", squared_norm, stream);
  call.exact("squared_norm", squared_norm, 1, DType::f64);
  call.exact("factor", factor, 2, DType::f32);
  call.run([&] { cpu::resolve_step_factor(squared_norm, inputs, factor); },
           ADAMANT_CUDA_CALL(cuda::resolve_step_factor(squared_norm, inputs, factor, stream)));
}

}  // namespace adamant::kernels
