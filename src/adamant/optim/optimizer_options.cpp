// The model.optim keys' checks (OptimizerOptions in optim/optimizer.h), apart from the
// optimizers themselves so that the config reader (and its fuzzer) needs no optimizer code.
#include <cmath>

#include "adamant/core/error.h"
#include "adamant/optim/optimizer.h"

namespace adamant::optim {

void OptimizerOptions::validate(const KeyOrigin& origin) const {
  const OptionChecks check(origin);
  check.one_of("model.optim.name", name, {"fused_adam", "distributed_fused_adam"}, "optimizer",
               "use one of fused_adam, distributed_fused_adam (adam and adamw are aliases of fused_adam)");
  const bool distributed = name == "distributed_fused_adam";
  if (distributed && !megatron_amp_O2) {
    fail(
        "model.optim.name=distributed_fused_adam requires model.megatron_amp_O2=true (bf16/fp16 model weights with "
        "fp32 main weights held by the optimizer){}; set model.megatron_amp_O2: true with trainer.precision: bf16, "
        "or use model.optim.name: fused_adam",
        check.where("model.optim.name"));
  }
  if (model_dtype != DType::f32 && model_dtype != DType::bf16 && model_dtype != DType::f16) {
    fail("model weights of {} are not supported; set trainer.precision to 32, bf16 or 16", dtype_name(model_dtype));
  }
  if (store_param_remainders && (!distributed || model_dtype != DType::bf16)) {
    fail(
        "model.optim.store_param_remainders=true needs bf16 weights (the fp32 main weight is the bf16 weight plus "
        "a 16-bit remainder) sharded by distributed_fused_adam, but the model weights are {} with {}{}; set "
        "trainer.precision: bf16, model.megatron_amp_O2: true and model.optim.name: distributed_fused_adam, or "
        "model.optim.store_param_remainders: false",
        dtype_name(model_dtype), name, check.where("model.optim.store_param_remainders"));
  }
  if (grad_sync_dtype != DType::f32 && grad_sync_dtype != DType::bf16) {
    fail("model.optim.grad_sync_dtype: unsupported value '{}'{}; use fp32 (float32) or bf16 (bfloat16)",
         dtype_name(grad_sync_dtype), check.where("model.optim.grad_sync_dtype"));
  }
  if (!distributed && grad_sync_dtype != DType::f32) {
    fail(
        "model.optim.grad_sync_dtype=bf16 is supported by distributed_fused_adam only{}; set "
        "model.optim.grad_sync_dtype: fp32 or model.optim.name: distributed_fused_adam",
        check.where("model.optim.grad_sync_dtype"));
  }
  check.at_least("model.optim.weight_decay", weight_decay, 0.0, "the decoupled weight decay, e.g. 0.1");
  for (const auto& [key, beta] : {std::pair{"model.optim.betas[0]", beta1}, {"model.optim.betas[1]", beta2}}) {
    if (!(beta >= 0.0 && beta < 1.0)) {
      fail("{} must be in [0, 1) (got {}){}; Adam's betas are e.g. [0.9, 0.95]", key, beta,
           check.where("model.optim.betas"));
    }
  }
  check.positive("model.optim.eps", eps, "Adam's denominator epsilon, e.g. 1e-8");
  check.positive("model.optim.bucket_cap_mb", bucket_cap_mb, "the bucket size in MiB, e.g. 100");
  if (!std::isfinite(bucket_cap_mb)) {
    fail("model.optim.bucket_cap_mb is {}{}; give a finite size in MiB, e.g. 100", bucket_cap_mb,
         check.where("model.optim.bucket_cap_mb"));
  }
  check.at_least("model.optim.update_sms", update_sms, 0, "the SMs Adam runs on beside the forward (0: every SM)");
  check.at_least("trainer.gradient_clip_val", gradient_clip_val, 0.0,
                 "the maximum global gradient norm (0 disables clipping)");
  check.positive("model.native_amp_init_scale", initial_loss_scale, "the initial fp16 loss scale, e.g. 4294967296");
  check.at_least("model.native_amp_growth_interval", loss_scale_growth_interval, 1,
                 "the steps without overflow before the fp16 loss scale doubles");
  check.at_least("model.hysteresis", hysteresis, 1, "the overflows tolerated before the fp16 loss scale shrinks");
}

}  // namespace adamant::optim
