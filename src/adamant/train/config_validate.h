#pragma once
// Checks of a typed training config: each layer's own (its option struct's
// validate()) and the few that span layers.
#include "adamant/train/config_document.h"
#include "adamant/train/train_config.h"

namespace adamant::train::detail {

// Throws adamant::Error naming the key, the value, where it came from and the fix.
void validate_train_config(const TrainConfig& config, const ConfigDocument& document);

}  // namespace adamant::train::detail
