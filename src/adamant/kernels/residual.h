#pragma once
// Residual connection: the sum of the stream and a branch.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

// out = a + b over n elements; out may alias a or b.
void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n, const Stream& stream);

}  // namespace adamant::kernels
