#include "adamant/optim/optimizer.h"

#include <cmath>

#include "adamant/core/error.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/distributed_fused_adam.h"
#include "adamant/optim/fused_adam.h"
#include "adamant/optim/loss_scaler.h"

namespace adamant::optim {

Optimizer::~Optimizer() = default;

void validate_options(const OptimizerOptions& o) {
  const bool distributed = o.name == "distributed_fused_adam";
  ADAMANT_CHECK(distributed || o.name == "fused_adam",
                "model.optim.name='{}' is not supported; use fused_adam or distributed_fused_adam", o.name);
  ADAMANT_CHECK(o.model_dtype == DType::f32 || o.model_dtype == DType::bf16 || o.model_dtype == DType::f16,
                "model weights of {} are not supported; set trainer.precision to 32, bf16 or 16",
                dtype_name(o.model_dtype));
  ADAMANT_CHECK(!distributed || o.megatron_amp_O2,
                "model.optim.name=distributed_fused_adam requires model.megatron_amp_O2=true (half-precision model "
                "weights, fp32 main weights sharded in the optimizer); set model.megatron_amp_O2=true or use "
                "model.optim.name=fused_adam");
  ADAMANT_CHECK(o.bucket_cap_mb > 0 && std::isfinite(o.bucket_cap_mb),
                "model.optim.bucket_cap_mb={} must be a positive number of MiB (Apex's default is 100)",
                o.bucket_cap_mb);
  ADAMANT_CHECK(o.grad_sync_dtype == DType::f32 || o.grad_sync_dtype == DType::bf16,
                "model.optim.grad_sync_dtype={} is not supported; use fp32 or bf16", dtype_name(o.grad_sync_dtype));
  ADAMANT_CHECK(distributed || o.grad_sync_dtype == DType::f32,
                "model.optim.grad_sync_dtype=bf16 is supported by distributed_fused_adam only; set "
                "model.optim.grad_sync_dtype=fp32 or model.optim.name=distributed_fused_adam");
  ADAMANT_CHECK(!o.store_param_remainders || (distributed && o.model_dtype == DType::bf16),
                "model.optim.store_param_remainders=true needs model.optim.name=distributed_fused_adam with bf16 "
                "model weights (trainer.precision=bf16, model.megatron_amp_O2=true); set it to false otherwise");
  ADAMANT_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                "model.optim.betas=[{}, {}] must both lie in [0, 1)", o.beta1, o.beta2);
  ADAMANT_CHECK(o.eps > 0, "model.optim.eps={} must be positive (default 1e-8)", o.eps);
  ADAMANT_CHECK(o.weight_decay >= 0, "model.optim.weight_decay={} must not be negative", o.weight_decay);
  ADAMANT_CHECK(o.gradient_clip_val >= 0, "trainer.gradient_clip_val={} must not be negative (0 disables clipping)",
                o.gradient_clip_val);
  if (o.model_dtype == DType::f16) {
    const DynamicLossScaler check(o.initial_loss_scale, o.loss_scale_growth_interval, o.hysteresis);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, const ParamList& params,
                                          comm::Communicator& data_parallel, const Stream& compute_stream,
                                          GradNormScope norm_scope) {
  validate_options(options);
  if (options.name == "distributed_fused_adam") {
    return std::make_unique<DistributedFusedAdam>(options, params, data_parallel, compute_stream, norm_scope);
  }
  return std::make_unique<FusedAdam>(options, params, data_parallel, compute_stream, norm_scope);
}

}  // namespace adamant::optim
