#pragma once
// Layer normalisation over the last dimension with a learned scale and shift.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

struct RowsShape {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// Per row of x [rows, cols]: mean, rstd = 1 / sqrt(biased variance + epsilon),
// out = (x - mean) * rstd * weight + bias. mean and rstd [rows] are kept for backward.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream);

// d_x += dL/dx (accumulates: in a pre-LN block it is the residual stream's gradient);
// d_weight and d_bias are overwritten.
void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        const Stream& stream);

}  // namespace adamant::kernels
