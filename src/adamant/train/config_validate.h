#pragma once
// Range checks and impossible combinations of a typed training config.
#include "adamant/train/config_document.h"
#include "adamant/train/train_config.h"

namespace adamant::train::detail {

// Throws adamant::Error naming the key, the value, where it came from and the fix.
void validate_train_config(const TrainConfig& config, const ConfigDocument& document);

}  // namespace adamant::train::detail
