#pragma once
// A fully connected layer with an optional bias, Megatron's weight layout [out_features, in_features].
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

struct LinearShape {
  std::int64_t rows = 0;  // tokens
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
};

// out[rows, out] = in[rows, in] * weight^T + bias. An empty bias (data == nullptr) adds
// none (a row-parallel layer whose bias only one tensor-parallel rank adds).
void linear_forward(const Tensor& in, const Tensor& weight, const Tensor& bias, Tensor out, const LinearShape& shape,
                    const Stream& stream);

// What the weight gradient does with d_weight's old contents.
enum class WeightGrad : std::uint8_t {
  overwrite,
  accumulate,  // d_weight += d_out^T * in, by the GEMM itself (beta = 1): no separate pass
};

// d_in = d_out * weight, d_weight = d_out^T * in (or += with WeightGrad::accumulate), d_bias
// = column sums of d_out; d_in and d_bias overwritten. An empty d_in or d_bias (data ==
// nullptr) skips that result.
void linear_backward(const Tensor& d_out, const Tensor& in, const Tensor& weight, Tensor d_in, Tensor d_weight,
                     Tensor d_bias, const LinearShape& shape, const Stream& stream,
                     WeightGrad weight_grad = WeightGrad::overwrite);

}  // namespace adamant::kernels
