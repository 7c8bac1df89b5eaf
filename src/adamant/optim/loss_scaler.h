#pragma once
// fp16 dynamic loss scaling with hysteresis, as NeMo's GradScaler: an overflow
// (non-finite grad norm) costs one unit of hysteresis; when it runs out the scale
// is halved (and halved again on every further overflow until a clean step); a
// clean step restores the hysteresis, and `growth_interval` clean steps in a row
// double the scale (unless that would overflow fp32).
#include <cstdint>
#include <nlohmann/json.hpp>

namespace adamant::optim {

class DynamicLossScaler {
 public:
  static constexpr double kBackoffFactor = 0.5;
  static constexpr double kGrowthFactor = 2.0;

  // Disabled (bf16 / fp32 training): the scale stays 1 and update() does nothing.
  DynamicLossScaler() = default;
  DynamicLossScaler(double initial_scale, int growth_interval, int hysteresis);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // Called once per step with whether the step's gradients overflowed.
  void update(bool found_non_finite);

  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);  // from state(); throws naming the missing field

 private:
  bool enabled_ = false;
  double scale_ = 1.0;
  int growth_interval_ = 1000;
  int hysteresis_ = 2;
  int growth_tracker_ = 0;      // clean steps since the last change
  int hysteresis_tracker_ = 2;  // overflows still tolerated before backing off
};

}  // namespace adamant::optim
