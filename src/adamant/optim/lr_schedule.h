#pragma once
// Learning-rate schedules with NeMo's formulas (nemo/core/optim/lr_scheduler.py).
//
// `step` is the number of optimizer steps already taken (0 for the first step),
// which is PyTorch's scheduler.last_epoch when the optimizer steps. CosineAnnealing:
//  - constant_steps == 0: warmup lr*(step+1)/(warmup_steps+1) for step <= warmup_steps
//    (when warmup_steps > 0), then min_lr + (lr-min_lr)*(1+cos(pi*(step-warmup)/(max_steps-warmup)))/2,
//    and min_lr for step > max_steps.
//  - constant_steps > 0 (Megatron style): warmup lr*step/warmup_steps (from 0), cosine over
//    decay_steps = max_steps - warmup_steps - constant_steps, then min_lr (the "constant" tail
//    holds min_lr, and so does everything after max_steps).
// "constant": lr at every step.
#include <cstdint>
#include <string>

#include "adamant/core/option_checks.h"

namespace adamant::optim {

struct LrSchedule {
  std::string name = "CosineAnnealing";  // model.optim.sched.name: CosineAnnealing | constant
  double lr = 1e-4;                      // model.optim.lr (peak)
  std::int64_t warmup_steps = 0;         // model.optim.sched.warmup_steps
  std::int64_t constant_steps = 0;       // model.optim.sched.constant_steps
  double min_lr = 0.0;                   // model.optim.sched.min_lr
  // model.optim.sched.max_steps; 0 (NeMo's null): the run's trainer.max_steps, filled in before use.
  std::int64_t max_steps = 0;

  bool operator==(const LrSchedule&) const = default;
};

// Throws adamant::Error naming the model.optim key and the fix; `origin` says where a key's value came from.
void validate(const LrSchedule& schedule, const KeyOrigin& origin = {});
double learning_rate(const LrSchedule& schedule, std::int64_t step);

}  // namespace adamant::optim
