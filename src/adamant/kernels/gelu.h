#pragma once
// Exact GELU, x * Phi(x) with the erf form (PyTorch's F.gelu default, as NeMo uses).
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

// out = x * 0.5 * (1 + erf(x / sqrt(2))) over n elements.
void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, const Stream& stream);
// d_x = d_out * gelu'(x); d_x may alias d_out.
void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, std::int64_t n, const Stream& stream);

}  // namespace adamant::kernels
