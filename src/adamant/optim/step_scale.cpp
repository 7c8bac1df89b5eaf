#include "adamant/optim/step_scale.h"

#include <cmath>

namespace adamant::optim {

StepScale resolve_step_scale(double squared_norm_of_sum, double grad_scale, double loss_scale, double clip_val) {
  StepScale result;
  const double unscale = grad_scale / loss_scale;
  result.grad_norm = std::sqrt(squared_norm_of_sum) * std::abs(unscale);
  result.finite = std::isfinite(result.grad_norm);
  double clip = 1.0;
  if (result.finite && clip_val > 0) {
    const double coefficient = clip_val / (result.grad_norm + kClipEpsilon);
    if (coefficient < 1.0) clip = coefficient;
  }
  result.adam_grad_scale = static_cast<float>(unscale * clip);
  return result;
}

}  // namespace adamant::optim
