#pragma once
// The Adam constants the CUDA benches time the optimizer kernels with: GPT-3's betas, epsilon
// and weight decay at step 10, AdamW, gradients unscaled.
#include <cmath>

#include "adamant/kernels/cuda/launchers.h"

namespace adamant::bench {

inline kernels::cuda::launchers::AdamConstants adam_constants_for_timing() {
  kernels::cuda::launchers::AdamConstants c{};
  c.lr = 1e-4f;
  c.beta1 = 0.9f;
  c.beta2 = 0.95f;
  c.one_minus_beta1 = 1.0f - c.beta1;
  c.one_minus_beta2 = 1.0f - c.beta2;
  c.eps = 1e-8f;
  c.weight_decay = 0.1f;
  c.bias_correction1 = static_cast<float>(1.0 - std::pow(0.9, 10.0));
  c.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(0.95f), 10.0));
  c.grad_scale = 1.0f;
  c.adamw = true;
  return c;
}

}  // namespace adamant::bench
