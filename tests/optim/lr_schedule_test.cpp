// Learning rates against values worked out by hand from NeMo's formulas
// (nemo/core/optim/lr_scheduler.py: CosineAnnealing, WarmupAnnealHoldPolicy).
#include "adamant/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "adamant/core/error.h"

namespace adamant::optim {
namespace {

TEST(LrSchedule, CosineWithoutConstantSteps) {
  // max 1e-3, min 1e-5, 10 warmup steps, 100 steps in all.
  const LrSchedule s{"CosineAnnealing", 1e-3, 10, 0, 1e-5, 100};
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 1e-3 * 1.0 / 11.0);  // warmup (step + 1) / (warmup + 1): never 0
  EXPECT_DOUBLE_EQ(learning_rate(s, 4), 1e-3 * 5.0 / 11.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10), 1e-3);
  // Halfway through the 90 decay steps: cos(pi/2) = 0, so the middle of [min, max].
  EXPECT_NEAR(learning_rate(s, 55), 1e-5 + (1e-3 - 1e-5) * 0.5, 1e-18);
  EXPECT_NEAR(learning_rate(s, 25), 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(std::numbers::pi / 6)), 1e-18);
  EXPECT_NEAR(learning_rate(s, 100), 1e-5, 1e-18);  // cos(pi) = -1
  EXPECT_DOUBLE_EQ(learning_rate(s, 101), 1e-5);    // after max_steps: min_lr
  EXPECT_DOUBLE_EQ(learning_rate(s, 5000), 1e-5);
}

TEST(LrSchedule, CosineWithoutWarmupStartsAtPeak) {
  const LrSchedule s{"CosineAnnealing", 2e-4, 0, 0, 0.0, 50};
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 2e-4);
  EXPECT_NEAR(learning_rate(s, 25), 1e-4, 1e-18);
}

TEST(LrSchedule, MegatronStyleWithConstantSteps) {
  // warmup 10, constant 20, max 100: decay_steps = 70; warmup is step / warmup (starts at 0).
  const LrSchedule s{"CosineAnnealing", 1e-3, 10, 20, 1e-5, 100};
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 5), 5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10), 1e-3);
  EXPECT_NEAR(learning_rate(s, 45), 1e-5 + (1e-3 - 1e-5) * 0.5, 1e-18);  // 35 of 70 decay steps
  EXPECT_NEAR(learning_rate(s, 80), 1e-5, 1e-18);                        // end of decay
  EXPECT_DOUBLE_EQ(learning_rate(s, 81), 1e-5);                          // the constant tail holds min_lr
  EXPECT_DOUBLE_EQ(learning_rate(s, 100), 1e-5);
  EXPECT_DOUBLE_EQ(learning_rate(s, 101), 1e-5);
}

TEST(LrSchedule, ConstantAndBadInput) {
  const LrSchedule constant{"constant", 3e-4, 0, 0, 0.0, 0};
  EXPECT_DOUBLE_EQ(learning_rate(constant, 0), 3e-4);
  EXPECT_DOUBLE_EQ(learning_rate(constant, 123456), 3e-4);
  const auto expect_error = [](const LrSchedule& s, const char* key) {
    try {
      validate(s);
      ADD_FAILURE() << "accepted a bad schedule; expected an error naming " << key;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_error({"Cosine", 1e-3, 0, 0, 0.0, 10}, "model.optim.sched.name");
  expect_error({"CosineAnnealing", 1e-3, 10, 0, 0.0, 0}, "model.optim.sched.max_steps");
  expect_error({"CosineAnnealing", 1e-3, 0, 0, 1e-2, 10}, "model.optim.sched.min_lr");
}

TEST(LrSchedule, RunShorterThanWarmupStaysInWarmup) {
  // A smoke test of a big config (trainer.max_steps=5 with 10 warmup steps) is allowed.
  const LrSchedule s{"CosineAnnealing", 1e-3, 10, 0, 1e-5, 5};
  EXPECT_DOUBLE_EQ(learning_rate(s, 0), 1e-3 * 1.0 / 11.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 4), 1e-3 * 5.0 / 11.0);
}

}  // namespace
}  // namespace adamant::optim
