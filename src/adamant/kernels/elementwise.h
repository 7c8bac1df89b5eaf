#pragma once
// Small element-wise kernels on flat views: casts, fills, scaling.
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

// dst = src converted (f32, bf16, f16 in any combination; same dtype = copy). Same numel.
// To bf16/f16: round to nearest even.
void cast(const Tensor& src, Tensor dst, const Stream& stream);
void fill_zero(Tensor x, const Stream& stream);
// x *= s (f32, bf16, f16).
void scale(Tensor x, float s, const Stream& stream);
// dst += src (dst fp32; src fp32 or bf16).
void accumulate(const Tensor& src, Tensor dst, const Stream& stream);

}  // namespace adamant::kernels
