#pragma once
// Small element-wise kernels on flat views: casts, fills, scaling.
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels {

namespace cpu {
void cast(const Tensor& src, Tensor dst);
void fill_zero(Tensor x);
void scale(Tensor x, float s);
void accumulate(const Tensor& src, Tensor dst);
}  // namespace cpu

namespace cuda {
void cast(const Tensor& src, Tensor dst, const Stream& stream);
void fill_zero(Tensor x, const Stream& stream);
void scale(Tensor x, float s, const Stream& stream);
void accumulate(const Tensor& src, Tensor dst, const Stream& stream);
}  // namespace cuda

namespace detail {

inline bool is_float(DType dtype) { return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16; }

}  // namespace detail

// dst = src converted (f32, bf16, f16 in any combination; same dtype = copy). Same numel.
// To bf16/f16: round to nearest even.
inline void cast(const Tensor& src, Tensor dst, const Stream& stream) {
  const KernelCall call("cast", src, stream);
  ADAMANT_CHECK(detail::is_float(src.dtype) && detail::is_float(dst.dtype),
                "cast: {} to {} (fp32, bf16 or fp16 expected)", dtype_name(src.dtype), dtype_name(dst.dtype));
  call.same_device("dst", dst);
  ADAMANT_CHECK(src.numel() == dst.numel(), "cast: {} elements into {}", src.numel(), dst.numel());
  call.run([&] { cpu::cast(src, dst); }, ADAMANT_CUDA_CALL(cuda::cast(src, dst, stream)));
}

inline void fill_zero(Tensor x, const Stream& stream) {
  const KernelCall call("fill_zero", x, stream);
  call.run([&] { cpu::fill_zero(x); }, ADAMANT_CUDA_CALL(cuda::fill_zero(x, stream)));
}

// x *= s (f32, bf16, f16).
inline void scale(Tensor x, float s, const Stream& stream) {
  const KernelCall call("scale", x, stream);
  ADAMANT_CHECK(detail::is_float(x.dtype), "scale: {} tensors are not supported (fp32, bf16 or fp16)",
                dtype_name(x.dtype));
  call.run([&] { cpu::scale(x, s); }, ADAMANT_CUDA_CALL(cuda::scale(x, s, stream)));
}

// dst += src (dst fp32, src fp32 or bf16; on the CPU also both fp64). Same numel.
inline void accumulate(const Tensor& src, Tensor dst, const Stream& stream) {
  const KernelCall call("accumulate", dst, stream);
  const bool f64 = !call.on_cuda() && dst.dtype == DType::f64;
  const bool into_f32 = dst.dtype == DType::f32 && (src.dtype == DType::f32 || src.dtype == DType::bf16);
  const bool into_bf16 = dst.dtype == DType::bf16 && src.dtype == DType::f32;  // a bf16 gradient buffer
  ADAMANT_CHECK(f64 ? src.dtype == DType::f64 : into_f32 || into_bf16,
                "accumulate: {} into {}; the destination is fp32 (source fp32 or bf16), bf16 (source fp32), or fp64 "
                "from fp64 on the CPU",
                dtype_name(src.dtype), dtype_name(dst.dtype));
  call.same_device("src", src);
  ADAMANT_CHECK(src.numel() == dst.numel(), "accumulate: {} elements into {}", src.numel(), dst.numel());
  call.run([&] { cpu::accumulate(src, dst); }, ADAMANT_CUDA_CALL(cuda::accumulate(src, dst, stream)));
}

}  // namespace adamant::kernels
