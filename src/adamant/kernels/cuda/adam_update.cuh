#pragma once
// One element's Adam update in the CPU reference's order (kernels/adam.h), shared by the
// kernels of adam.cu and adam_bulk.cu so that both produce the reference's fp32 bits: explicit
// round-to-nearest intrinsics, no fused multiply-add, IEEE division and square root.
// Only for *.cu files.
#include "adamant/kernels/cuda/launchers.h"

namespace adamant::kernels::cuda::launchers {

// Takes the step's factor from the device where the constants point to one (every thread of
// the grid reads the same two floats); false where it says to skip the step: the kernel then
// reads and writes nothing.
__device__ __forceinline__ bool take_step_factor(AdamConstants& c) {
  if (c.step_factor == nullptr) return true;
  if (__ldg(c.step_factor + 1) != 0.0f) return false;
  c.grad_scale = __ldg(c.step_factor);
  return true;
}

// One element's update; m and v are updated in place, the new weight returned.
// Decay terms are added only for decaying segments, as in the CPU reference, so
// even the signs of zeros agree.
__device__ __forceinline__ float adam_update(float p, float grad, float& m, float& v, bool decay,
                                             const AdamConstants& c) {
  float g = __fmul_rn(grad, c.grad_scale);
  if (!c.adamw && decay) g = __fadd_rn(g, __fmul_rn(c.weight_decay, p));
  m = __fadd_rn(__fmul_rn(c.beta1, m), __fmul_rn(c.one_minus_beta1, g));
  v = __fadd_rn(__fmul_rn(c.beta2, v), __fmul_rn(__fmul_rn(c.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(v, c.bias_correction2)), c.eps);
  float update = __fdiv_rn(__fdiv_rn(m, c.bias_correction1), denom);
  if (c.adamw && decay) update = __fadd_rn(update, __fmul_rn(c.weight_decay, p));
  return __fsub_rn(p, __fmul_rn(c.lr, update));
}

}  // namespace adamant::kernels::cuda::launchers
