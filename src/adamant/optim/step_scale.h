#pragma once
// Folds averaging, the fp16 unscale and gradient clipping into the one factor the
// Adam kernel multiplies every synced gradient by (docs/distributed_fused_adam.md, "A step").
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/adam.h"
#include "adamant/optim/loss_scaler.h"
#include "adamant/optim/optimizer.h"

namespace adamant::optim {

struct StepScale {
  double grad_norm = 0;          // L2 norm of the unscaled, averaged gradient, before clipping
  bool finite = true;            // false: the step must be skipped
  float adam_grad_scale = 1.0f;  // AdamArgs::grad_scale
};

// Gradient clipping as NeMo/Apex: multiply by clip_val / (norm + 1e-6) when that is below 1.
inline constexpr double kClipEpsilon = 1e-6;

// squared_norm_of_sum: squared L2 norm of the synced gradient (a sum over micro-batches and ranks, still
// multiplied by the loss scale). grad_scale: the factor that turns that sum into the mean gradient.
// clip_val: 0 disables clipping.
StepScale resolve_step_scale(double squared_norm_of_sum, double grad_scale, double loss_scale, double clip_val);

// Reads the squared norm (one fp64 on the stream's device) to the host. This is the one host
// synchronisation of a step: skipping and clipping need the value.
double read_squared_norm(const Tensor& norm, const Stream& stream);

// The dynamic loss scaler for fp16 model weights; a fixed scale of 1 otherwise.
DynamicLossScaler make_loss_scaler(const OptimizerOptions& options);

// The Adam kernel's arguments for one step: the options' hyper-parameters plus this step's values.
kernels::AdamArgs adam_args_for_step(const OptimizerOptions& options, double lr, std::int64_t step,
                                     float adam_grad_scale);

}  // namespace adamant::optim
