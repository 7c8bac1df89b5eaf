#include "adamant/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "adamant/core/error.h"

namespace adamant::optim {

namespace {

double cosine_between(double max_lr, double min_lr, double fraction) {
  return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * fraction));
}

// NeMo's _linear_warmup_with_cosine_annealing (used when constant_steps > 0).
double megatron_cosine(const LrSchedule& s, std::int64_t step) {
  const std::int64_t decay_steps = s.max_steps - s.warmup_steps - s.constant_steps;
  if (s.warmup_steps > 0 && step <= s.warmup_steps) {
    return s.lr * static_cast<double>(step) / static_cast<double>(s.warmup_steps);
  }
  if (step > s.warmup_steps + decay_steps) return s.min_lr;
  return cosine_between(s.lr, s.min_lr, static_cast<double>(step - s.warmup_steps) / static_cast<double>(decay_steps));
}

}  // namespace

void validate(const LrSchedule& s, const KeyOrigin& origin) {
  const OptionChecks check(origin);
  check.one_of("model.optim.sched.name", s.name, {"CosineAnnealing", "constant"}, "schedule",
               "use CosineAnnealing or constant");
  check.positive("model.optim.lr", s.lr, "the peak learning rate, e.g. 3e-4");
  check.at_least("model.optim.sched.warmup_steps", s.warmup_steps, std::int64_t{0},
                 "the linear warmup length in steps");
  check.at_least("model.optim.sched.constant_steps", s.constant_steps, std::int64_t{0},
                 "the steps held at min_lr after the decay");
  check.at_least("model.optim.sched.min_lr", s.min_lr, 0.0, "the final learning rate of the cosine decay");
  if (s.min_lr > s.lr) {
    fail("model.optim.sched.min_lr ({}) must be <= model.optim.lr ({}){}; the cosine decays from lr to min_lr",
         s.min_lr, s.lr, check.where("model.optim.sched.min_lr"));
  }
  // A run shorter than warmup + constant steps is allowed (a smoke test of a big config): it ends
  // while the learning rate is still warming up or held. A constant schedule has no length.
  if (s.name == "CosineAnnealing")
    check.at_least("model.optim.sched.max_steps", s.max_steps, std::int64_t{1},
                   "the schedule length (null: trainer.max_steps)");
}

double learning_rate(const LrSchedule& s, std::int64_t step) {
  validate(s);
  ADAMANT_CHECK(step >= 0, "learning_rate: step {} is negative", step);
  if (s.name == "constant") return s.lr;
  if (s.constant_steps > 0) {
    if (step > s.max_steps) return s.min_lr;
    return megatron_cosine(s, step);
  }
  if (s.warmup_steps > 0 && step <= s.warmup_steps) {
    return s.lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps + 1);
  }
  if (step > s.max_steps) return s.min_lr;
  return cosine_between(s.lr, s.min_lr,
                        static_cast<double>(step - s.warmup_steps) / static_cast<double>(s.max_steps - s.warmup_steps));
}

}  // namespace adamant::optim
