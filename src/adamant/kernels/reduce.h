#pragma once
// Reductions used by the optimizer: squared L2 norms and non-finite checks.
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

// out (one fp64 on x's device) = sum of x[i]^2 over the given segments (same i64
// triple format as adam.h; the decay flag is ignored), plus out's old value when
// accumulate. x: fp32 or bf16. Non-finite inputs make the result non-finite.
// fp64 out: the optimizers add buckets and ranks to it and round the norm once.
void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate, const Stream& stream);

}  // namespace adamant::kernels
