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

DynamicLossScaler make_loss_scaler(const OptimizerOptions& options) {
  if (options.model_dtype != DType::f16) return {};
  return DynamicLossScaler(options.initial_loss_scale, options.loss_scale_growth_interval, options.hysteresis);
}

double read_squared_norm(const Tensor& norm, const Stream& stream) {
  double squared_norm = 0;
  stream.synchronize();
  copy_bytes(&squared_norm, Device::cpu(), norm.data, norm.device, sizeof(double));
  return squared_norm;
}

kernels::AdamArgs adam_args_for_step(const OptimizerOptions& options, double lr, std::int64_t step,
                                     float adam_grad_scale) {
  kernels::AdamArgs args;
  args.lr = static_cast<float>(lr);
  args.beta1 = static_cast<float>(options.beta1);
  args.beta2 = static_cast<float>(options.beta2);
  args.eps = static_cast<float>(options.eps);
  args.weight_decay = static_cast<float>(options.weight_decay);
  args.adamw = options.adam_w_mode;
  args.step = step;
  args.grad_scale = adam_grad_scale;
  return args;
}

}  // namespace adamant::optim
