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

void validate(const LrSchedule& s) {
  if (s.name == "constant") {
    ADAMANT_CHECK(s.lr >= 0, "model.optim.lr={} must not be negative", s.lr);
    return;
  }
  ADAMANT_CHECK(s.name == "CosineAnnealing",
                "model.optim.sched.name='{}' is not supported; use CosineAnnealing or constant", s.name);
  ADAMANT_CHECK(s.warmup_steps >= 0 && s.constant_steps >= 0,
                "model.optim.sched.warmup_steps={} and constant_steps={} must not be negative", s.warmup_steps,
                s.constant_steps);
  // A run shorter than warmup + constant steps is allowed (a smoke test of a big config): it ends
  // while the learning rate is still warming up or held.
  ADAMANT_CHECK(s.max_steps > 0, "model.optim.sched.max_steps={} must be positive (it defaults to trainer.max_steps)",
                s.max_steps);
  ADAMANT_CHECK(s.min_lr >= 0 && s.lr >= s.min_lr,
                "model.optim.sched.min_lr={} must lie between 0 and model.optim.lr={}", s.min_lr, s.lr);
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
