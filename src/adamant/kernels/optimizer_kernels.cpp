// The optimizer kernels' dispatchers (kernels/dispatch.h): each checks its operands
// once and runs the CPU or the CUDA implementation by their device.
#include <climits>

#include "adamant/kernels/adam.h"
#include "adamant/kernels/cpu/optimizer_kernels_cpu.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#ifdef ADAMANT_HAVE_CUDA
#include "adamant/kernels/cuda/optimizer_kernels_cuda.h"
#endif

namespace adamant::kernels {

namespace {

bool is_float(DType dtype) { return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16; }

void check_segments(const KernelCall& call, const Tensor& segments) {
  ADAMANT_CHECK(segments.dtype == DType::i64 && segments.numel() % 3 == 0, "{}: segments must be i64 triples",
                call.op());
  ADAMANT_CHECK(segments.numel() / 3 <= static_cast<std::size_t>(INT_MAX), "{}: {} segments, at most {}", call.op(),
                segments.numel() / 3, INT_MAX);
  call.same_device("segments", segments);
}

void check_adam_operands(const KernelCall& call, const AdamArgs& args, const Tensor& segments, const Tensor& grad,
                         const Tensor& state, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const Tensor& model_param) {
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
  if (model_param.data != nullptr) {
    ADAMANT_CHECK(is_float(model_param.dtype), "adam: model weight copy of {} (fp32, bf16 or fp16 expected)",
                  dtype_name(model_param.dtype));
    call.exact("model_param", model_param, n, model_param.dtype);
  }
}

}  // namespace

void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param, const Stream& stream) {
  const KernelCall call("adam", grad, stream);
  check_adam_operands(call, args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param);
  ADAMANT_CHECK(main_param.dtype == DType::f32, "adam: main weights must be fp32");
  call.run(
      [&] { cpu::adam_step(args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param); },
      ADAMANT_CUDA_CALL(cuda::adam_step(args, segments, grad, main_param, exp_avg, exp_avg_sq, model_param, stream)));
}

void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param, const Stream& stream) {
  const KernelCall call("adam", grad, stream);
  check_adam_operands(call, args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param);
  ADAMANT_CHECK(remainder.dtype == DType::u16 && model_param.dtype == DType::bf16,
                "adam: remainders need u16 remainders and bf16 weights");
  call.run([&] { cpu::adam_step_remainder(args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param); },
           ADAMANT_CUDA_CALL(
               cuda::adam_step_remainder(args, segments, grad, remainder, exp_avg, exp_avg_sq, model_param, stream)));
}

void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, const Stream& stream) {
  const KernelCall call("squared_norm", x, stream);
  ADAMANT_CHECK(x.dtype == DType::f32 || x.dtype == DType::bf16, "squared_norm: {} input (fp32 or bf16 expected)",
                dtype_name(x.dtype));
  call.at_least("out", out, 1, DType::f64);
  check_segments(call, segments);
  call.run([&] { cpu::squared_norm(x, segments, out, accumulate); },
           ADAMANT_CUDA_CALL(cuda::squared_norm(x, segments, out, accumulate, stream)));
}

void cast(const Tensor& src, Tensor dst, const Stream& stream) {
  const KernelCall call("cast", src, stream);
  ADAMANT_CHECK(is_float(src.dtype) && is_float(dst.dtype), "cast: {} to {} (fp32, bf16 or fp16 expected)",
                dtype_name(src.dtype), dtype_name(dst.dtype));
  call.same_device("dst", dst);
  ADAMANT_CHECK(src.numel() == dst.numel(), "cast: {} elements into {}", src.numel(), dst.numel());
  call.run([&] { cpu::cast(src, dst); }, ADAMANT_CUDA_CALL(cuda::cast(src, dst, stream)));
}

void fill_zero(Tensor x, const Stream& stream) {
  const KernelCall call("fill_zero", x, stream);
  call.run([&] { cpu::fill_zero(x); }, ADAMANT_CUDA_CALL(cuda::fill_zero(x, stream)));
}

void scale(Tensor x, float s, const Stream& stream) {
  const KernelCall call("scale", x, stream);
  ADAMANT_CHECK(is_float(x.dtype), "scale: {} tensors are not supported (fp32, bf16 or fp16)", dtype_name(x.dtype));
  call.run([&] { cpu::scale(x, s); }, ADAMANT_CUDA_CALL(cuda::scale(x, s, stream)));
}

void accumulate(const Tensor& src, Tensor dst, const Stream& stream) {
  const KernelCall call("accumulate", dst, stream);
  // fp32 (from fp32 or bf16); on the CPU also fp64 from fp64 (the fp64 reference models).
  const bool f64 = !call.on_cuda() && dst.dtype == DType::f64;
  ADAMANT_CHECK(
      f64 ? src.dtype == DType::f64 : dst.dtype == DType::f32 && (src.dtype == DType::f32 || src.dtype == DType::bf16),
      "accumulate: {} into {}; the destination is fp32 (source fp32 or bf16), or fp64 from fp64 on the CPU",
      dtype_name(src.dtype), dtype_name(dst.dtype));
  call.exact("src", src, static_cast<std::int64_t>(dst.numel()), src.dtype);
  call.run([&] { cpu::accumulate(src, dst); }, ADAMANT_CUDA_CALL(cuda::accumulate(src, dst, stream)));
}

}  // namespace adamant::kernels
