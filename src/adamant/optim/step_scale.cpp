#include "adamant/optim/step_scale.h"

namespace adamant::optim {

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
                                     const Tensor& step_factor) {
  kernels::AdamArgs args;
  args.lr = static_cast<float>(lr);
  args.beta1 = static_cast<float>(options.beta1);
  args.beta2 = static_cast<float>(options.beta2);
  args.eps = static_cast<float>(options.eps);
  args.weight_decay = static_cast<float>(options.weight_decay);
  args.adamw = options.adam_w_mode;
  args.step = step;
  args.step_factor = step_factor;
  return args;
}

}  // namespace adamant::optim
