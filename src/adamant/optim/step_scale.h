#pragma once
// Folds averaging, the fp16 unscale and gradient clipping into the one factor the
// Adam kernel multiplies every synced gradient by (docs/distributed_fused_adam.md, "A step").
#include <cstdint>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/adam.h"
#include "adamant/kernels/step_factor.h"
#include "adamant/optim/loss_scaler.h"
#include "adamant/optim/optimizer.h"

namespace adamant::optim {

// The step's norm, whether it is finite and Adam's factor (kernels/step_factor.h: the same
// function on the host and, where Adam reads it, on the device).
using StepScale = kernels::StepFactor;

// Reads the squared norm (one fp64 on the stream's device) to the host: the one host
// synchronisation of a step, for the step's report, the loss scaler and the step count (Adam
// itself reads the factor on the device, queued before this).
double read_squared_norm(const Tensor& norm, const Stream& stream);

// The dynamic loss scaler for fp16 model weights; a fixed scale of 1 otherwise.
DynamicLossScaler make_loss_scaler(const OptimizerOptions& options);

// The Adam kernel's arguments for one step: the options' hyper-parameters plus this step's values, the
// gradients' factor read from `step_factor` on the device (BucketedGrads::step_factor).
kernels::AdamArgs adam_args_for_step(const OptimizerOptions& options, double lr, std::int64_t step,
                                     const Tensor& step_factor);

}  // namespace adamant::optim
