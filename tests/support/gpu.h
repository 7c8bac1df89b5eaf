#pragma once
// For tests of the CUDA backend: the GPU they run on, and a skip on machines without one
// (CPU-only CI does not run the gpu label at all).
#include <gtest/gtest.h>

#include "adamant/core/device.h"

namespace adamant::testing {

inline Device gpu() { return Device::cuda(0); }

}  // namespace adamant::testing

// Skips the test (with a message) when no CUDA GPU is present.
#define ADAMANT_REQUIRE_GPU()                                        \
  do {                                                               \
    if (!::adamant::cuda_available()) GTEST_SKIP() << "no CUDA GPU"; \
  } while (false)
