// Dispatch of the optimizer kernels to the CPU or CUDA implementation by the
// device of the data. Checks shapes and devices once here for both backends.
#include "adamant/core/error.h"
#include "adamant/kernels/adam.h"
#include "adamant/kernels/cpu/optimizer_kernels_cpu.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#ifdef ADAMANT_HAVE_CUDA
#include "adamant/kernels/cuda/optimizer_kernels_cuda.h"
#define ADAMANT_DISPATCH(device, call_cpu, call_cuda) \
  do {                                                \
    if ((device).is_cpu()) {                          \
      call_cpu;                                       \
    } else {                                          \
      call_cuda;                                      \
    }                                                 \
  } while (false)
#else
#define ADAMANT_DISPATCH(device, call_cpu, call_cuda)                                                 \
  do {                                                                                                \
    ADAMANT_CHECK((device).is_cpu(), "kernel on {}: this build has no CUDA support", (device).str()); \
    call_cpu;                                                                                         \
  } while (false)
#endif

namespace adamant::kernels {

namespace {

void check_same_device(const Tensor& a, const Tensor& b, const char* what) {
  ADAMANT_CHECK(a.data == nullptr || b.data == nullptr || a.device == b.device, "{}: tensors on {} and {}", what,
                a.device.str(), b.device.str());
}

void check_adam_operands(const Tensor& segments, const Tensor& grad, const Tensor& state, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq, const Tensor& model_param) {
  const std::size_t n = grad.numel();
  ADAMANT_CHECK(segments.dtype == DType::i64 && segments.numel() % 3 == 0, "adam: segments must be i64 triples");
  ADAMANT_CHECK(grad.dtype == DType::f32 || grad.dtype == DType::bf16, "adam: gradient of {} (fp32 or bf16 expected)",
                dtype_name(grad.dtype));
  ADAMANT_CHECK(state.numel() == n && exp_avg.numel() == n && exp_avg_sq.numel() == n,
                "adam: operand sizes differ (grad {}, param {}, exp_avg {}, exp_avg_sq {})", n, state.numel(),
                exp_avg.numel(), exp_avg_sq.numel());
  ADAMANT_CHECK(exp_avg.dtype == DType::f32 && exp_avg_sq.dtype == DType::f32, "adam: moments must be fp32");
  ADAMANT_CHECK(model_param.data == nullptr || model_param.numel() == n,
                "adam: model weight copy has {} elements, not {}", model_param.numel(), n);
  for (const Tensor* t : {&segments, &state, &exp_avg, &exp_avg_sq, &model_param}) check_same_device(grad, *t, "adam");
}

}  // namespace

void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param, const Stream& stream) {
  check_adam_operands(segments, grad, main_param, exp_avg, exp_avg_sq, model_param);
  ADAMANT_CHECK(main_param.dtype == DType::f32, "adam: main weights must be fp32");
  ADAMANT_DISPATCH(grad.device, cpu::adam_step(args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param),
                   cuda::adam_step(args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param, stream));
}

void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream) {
  check_adam_operands(segments, grad, remainder, exp_avg, exp_avg_sq, model_param);
  ADAMANT_CHECK(remainder.dtype == DType::u16 && model_param.dtype == DType::bf16,
                "adam: remainders need u16 remainders and bf16 weights");
  ADAMANT_DISPATCH(
      grad.device, cpu::adam_step_remainder(args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param),
      cuda::adam_step_remainder(args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param, stream));
}

void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, const Stream& stream) {
  ADAMANT_CHECK(out.dtype == DType::f64 && out.numel() >= 1, "squared_norm: out must hold one fp64");
  ADAMANT_CHECK(segments.dtype == DType::i64 && segments.numel() % 3 == 0,
                "squared_norm: segments must be i64 triples");
  check_same_device(x, out, "squared_norm");
  check_same_device(x, segments, "squared_norm");
  ADAMANT_DISPATCH(x.device, cpu::squared_norm(x, segments, out, accumulate),
                   cuda::squared_norm(x, segments, out, accumulate, stream));
}

void cast(const Tensor& src, Tensor dst, const Stream& stream) {
  ADAMANT_CHECK(src.numel() == dst.numel(), "cast: {} elements into {}", src.numel(), dst.numel());
  check_same_device(src, dst, "cast");
  ADAMANT_DISPATCH(src.device, cpu::cast(src, dst), cuda::cast(src, dst, stream));
}

void fill_zero(Tensor x, const Stream& stream) {
  ADAMANT_DISPATCH(x.device, cpu::fill_zero(x), cuda::fill_zero(x, stream));
}

void scale(Tensor x, float s, const Stream& stream) {
  ADAMANT_DISPATCH(x.device, cpu::scale(x, s), cuda::scale(x, s, stream));
}

void accumulate(const Tensor& src, Tensor dst, const Stream& stream) {
  ADAMANT_CHECK(src.numel() == dst.numel(), "accumulate: {} elements into {}", src.numel(), dst.numel());
  ADAMANT_CHECK(dst.dtype == DType::f32, "accumulate: destination must be fp32");
  check_same_device(src, dst, "accumulate");
  ADAMANT_DISPATCH(src.device, cpu::accumulate(src, dst), cuda::accumulate(src, dst, stream));
}

}  // namespace adamant::kernels
