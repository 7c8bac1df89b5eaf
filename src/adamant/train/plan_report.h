#pragma once
// What `adamant plan` prints: the layouts that fit, fastest first, each with its memory per GPU, bubble,
// communication and the overrides that select it; or, when none fits, the closest ones and the keys to change.
#include <string>
#include <vector>

#include "adamant/train/layout_plan.h"

namespace adamant::train {

struct PlanRequest {
  std::string config_name;  // as the user gave it
  int gpus = 1;
  bool gpu = true;             // GPUs, or CPU ranks (--cpu)
  double memory_per_rank = 0;  // bytes
};

struct PlanReport {
  std::string text;
  int fitting = 0;  // layouts that fit; none: the text says which keys to change
};

// plans: plan_layouts' result for the request (fastest first).
PlanReport plan_report(const TrainConfig& config, const PlanRequest& request, const std::vector<LayoutPlan>& plans);

// "1.5 GiB", "812.0 MiB".
std::string memory_text(double bytes);

}  // namespace adamant::train
