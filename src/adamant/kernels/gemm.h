#pragma once
// Dense matrix multiply on row-major matrices (fp32 or fp64). On the CPU it goes
// through CBLAS when the build found one, else through a blocked loop.
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

enum class Transpose : bool { no = false, yes = true };

// c[m, n] = alpha * op(a)[m, k] * op(b)[k, n] + beta * c (beta == 0 ignores c's old contents).
// a is stored [m, k], or [k, m] when transpose_a is yes; b is stored [k, n], or [n, k].
// All three contiguous, same dtype (f32 or f64), same device.
void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
          const Tensor& a, const Tensor& b, double beta, Tensor c, const Stream& stream);

}  // namespace adamant::kernels
