#pragma once
// The one factor Adam multiplies every synced gradient by (averaging, the fp16 unscale and
// gradient clipping folded together), from the squared norm of the synced gradient. Plain
// double arithmetic (no sum of products, so no fused multiply-add either way), compiled for
// the host and (under nvcc) the device alike: the optimizer resolves it on the device, where
// Adam reads it, and again on the host from the norm it reads back, and both get the same bits.
#include <math.h>

#if defined(__CUDACC__)
#define ADAMANT_STEP_FACTOR_FN __host__ __device__ __forceinline__
#else
#define ADAMANT_STEP_FACTOR_FN inline
#endif

namespace adamant::kernels {

// Gradient clipping as NeMo/Apex: multiply by clip_val / (norm + 1e-6) when that is below 1.
inline constexpr double kClipEpsilon = 1e-6;

struct StepFactor {
  double grad_norm = 0;          // L2 norm of the unscaled, averaged gradient, before clipping
  bool finite = true;            // false: the step must be skipped
  float adam_grad_scale = 1.0f;  // AdamArgs::grad_scale
};

// What the factor depends on besides the norm. grad_scale: the factor that turns the synced
// sum (over micro-batches and ranks) into the mean gradient; loss_scale: the scale the loss
// was multiplied by; clip_val: 0 disables clipping.
struct StepFactorInputs {
  double grad_scale = 1.0;
  double loss_scale = 1.0;
  double clip_val = 0.0;
};

ADAMANT_STEP_FACTOR_FN StepFactor step_factor_of(double squared_norm_of_sum, const StepFactorInputs& inputs) {
  StepFactor result;
  const double unscale = inputs.grad_scale / inputs.loss_scale;
  result.grad_norm = sqrt(squared_norm_of_sum) * (unscale < 0 ? -unscale : unscale);
  result.finite = result.grad_norm - result.grad_norm == 0.0;  // false for infinities and NaN
  double clip = 1.0;
  if (result.finite && inputs.clip_val > 0) {
    const double coefficient = inputs.clip_val / (result.grad_norm + kClipEpsilon);
    if (coefficient < 1.0) clip = coefficient;
  }
  result.adam_grad_scale = static_cast<float>(unscale * clip);
  return result;
}

}  // namespace adamant::kernels
