#include "adamant/train/config_validate.h"

#include <fmt/format.h>

#include "adamant/core/error.h"

namespace adamant::train::detail {

void validate_train_config(const TrainConfig& config, const ConfigDocument& document) {
  // Where a value came from; keys not in the input keep Adamant's default.
  const KeyOrigin origin = [&document](std::string_view key) {
    return document.raw(key) ? document.where(key) : std::string(" (Adamant's default)");
  };
  config.trainer.validate(origin);
  config.model.validate(origin);
  config.data.validate(origin);
  optimizer_options_of(config).validate(origin);
  optim::validate(lr_schedule_of(config), origin);
  config.exp_manager.validate(origin);

  // Across layers.
  if (config.optim.megatron_amp_O2 && config.trainer.precision == DType::f32) {
    fail(
        "model.megatron_amp_O2=true needs half-precision weights, but trainer.precision is 32{}; set "
        "trainer.precision: bf16 (or 16), or model.megatron_amp_O2: false",
        origin("model.megatron_amp_O2"));
  }
  const std::string& optimizer = config.optim.name;
  if (config.exp_manager.checkpoint_callback_params.node_local && optimizer != "distributed_fused_adam") {
    fail(
        "exp_manager.checkpoint_callback_params.node_local needs model.optim.name: distributed_fused_adam "
        "(got {}){}; {} writes its state from rank 0 only, which other hosts cannot read back",
        optimizer, origin("exp_manager.checkpoint_callback_params.node_local"), optimizer);
  }
}

}  // namespace adamant::train::detail
