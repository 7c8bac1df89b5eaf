#include "adamant/optim/loss_scaler.h"

#include <cmath>
#include <limits>

#include "adamant/core/error.h"

namespace adamant::optim {

DynamicLossScaler::DynamicLossScaler(double initial_scale, int growth_interval, int hysteresis)
    : enabled_(true),
      scale_(initial_scale),
      growth_interval_(growth_interval),
      hysteresis_(hysteresis),
      hysteresis_tracker_(hysteresis) {
  ADAMANT_CHECK(initial_scale > 0 && std::isfinite(initial_scale),
                "model.native_amp_init_scale={} must be a positive finite loss scale (NeMo's default is 2^32)",
                initial_scale);
  ADAMANT_CHECK(growth_interval >= 1, "model.native_amp_growth_interval={} must be at least 1 (default 1000)",
                growth_interval);
  ADAMANT_CHECK(hysteresis >= 1, "model.hysteresis={} must be at least 1 (default 2)", hysteresis);
}

void DynamicLossScaler::update(bool found_non_finite) {
  if (!enabled_) return;
  if (found_non_finite) {
    growth_tracker_ = 0;
    --hysteresis_tracker_;
    if (hysteresis_tracker_ <= 0) scale_ *= kBackoffFactor;
    return;
  }
  hysteresis_tracker_ = hysteresis_;
  if (++growth_tracker_ == growth_interval_) {
    growth_tracker_ = 0;
    const double grown = scale_ * kGrowthFactor;
    if (grown <= std::numeric_limits<float>::max()) scale_ = grown;  // never grow past fp32 range
  }
}

nlohmann::json DynamicLossScaler::state() const {
  return {{"enabled", enabled_},
          {"scale", scale_},
          {"growth_tracker", growth_tracker_},
          {"hysteresis_tracker", hysteresis_tracker_}};
}

void DynamicLossScaler::load_state(const nlohmann::json& state) {
  for (const char* key : {"enabled", "scale", "growth_tracker", "hysteresis_tracker"}) {
    ADAMANT_CHECK(state.contains(key), "loss scaler state in the checkpoint lacks '{}'; the file is not from Adamant",
                  key);
  }
  // A checkpoint of a bf16 run resumed in fp16 (or back) starts the scaler afresh.
  if (state.at("enabled").get<bool>() != enabled_) return;
  scale_ = state.at("scale").get<double>();
  growth_tracker_ = state.at("growth_tracker").get<int>();
  hysteresis_tracker_ = state.at("hysteresis_tracker").get<int>();
}

}  // namespace adamant::optim
