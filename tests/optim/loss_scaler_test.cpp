// The dynamic loss scaler against NeMo's GradScaler rules, step by step.
#include "adamant/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <limits>

#include "adamant/core/error.h"

namespace adamant::optim {
namespace {

TEST(DynamicLossScaler, HysteresisBackoffAndGrowth) {
  DynamicLossScaler scaler(65536.0, 3, 2);
  EXPECT_TRUE(scaler.enabled());
  scaler.update(false);  // clean 1
  EXPECT_EQ(scaler.scale(), 65536.0);
  scaler.update(true);  // first overflow: hysteresis 2 -> 1, no backoff, growth count reset
  EXPECT_EQ(scaler.scale(), 65536.0);
  scaler.update(true);  // second in a row: backoff
  EXPECT_EQ(scaler.scale(), 32768.0);
  scaler.update(true);  // hysteresis stays exhausted until a clean step: backoff again
  EXPECT_EQ(scaler.scale(), 16384.0);
  scaler.update(false);  // clean 1, hysteresis restored
  scaler.update(false);  // clean 2
  EXPECT_EQ(scaler.scale(), 16384.0);
  scaler.update(true);  // one overflow (hysteresis 2 -> 1): no backoff, growth count reset
  EXPECT_EQ(scaler.scale(), 16384.0);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 16384.0);
  scaler.update(false);  // third clean step in a row: growth
  EXPECT_EQ(scaler.scale(), 32768.0);
}

TEST(DynamicLossScaler, NeverGrowsPastFp32AndRoundTripsState) {
  DynamicLossScaler big(static_cast<double>(std::numeric_limits<float>::max()) / 1.5, 1, 1);
  big.update(false);
  EXPECT_EQ(big.scale(), static_cast<double>(std::numeric_limits<float>::max()) / 1.5);

  DynamicLossScaler a(1024.0, 5, 3);
  a.update(true);
  a.update(false);
  a.update(false);
  DynamicLossScaler b(1.0, 5, 3);
  b.load_state(a.state());
  for (bool overflow : {false, false, false, true, true, true, false}) {
    a.update(overflow);
    b.update(overflow);
    EXPECT_EQ(a.scale(), b.scale());
  }
  EXPECT_EQ(a.state(), b.state());
}

TEST(DynamicLossScaler, DisabledStaysAtOne) {
  DynamicLossScaler off;
  off.update(true);
  off.update(false);
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.scale(), 1.0);
  EXPECT_THROW(DynamicLossScaler(0.0, 10, 2), Error);
  EXPECT_THROW(DynamicLossScaler(8.0, 0, 2), Error);
}

}  // namespace
}  // namespace adamant::optim
