#pragma once
// Helpers for the model kernel tests: host vectors as tensors, seeded random
// data, and central finite differences in fp64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::testing {

template <typename T>
Tensor view(std::vector<T>& values) {
  return Tensor::flat(values.data(), dtype_of<T>(), Device::cpu(), values.size());
}

inline std::vector<double> random_normal(std::size_t n, std::uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(n);
  for (double& v : values) v = normal(rng);
  return values;
}

inline std::vector<float> to_float(const std::vector<double>& values) { return {values.begin(), values.end()}; }

// d loss / d x[i] by central differences; loss() reads x.
template <typename LossFn>
double central_difference(std::vector<double>& x, std::size_t i, LossFn&& loss, double step = 1e-5) {
  const double saved = x[i];
  x[i] = saved + step;
  const double plus = loss();
  x[i] = saved - step;
  const double minus = loss();
  x[i] = saved;
  return (plus - minus) / (2 * step);
}

// Checks every element of an analytic gradient against finite differences.
template <typename LossFn>
void expect_gradient(std::vector<double>& x, const std::vector<double>& analytic, LossFn&& loss, const char* what,
                     double tolerance = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double numeric = central_difference(x, i, loss);
    const double scale = std::max({std::abs(numeric), std::abs(analytic[i]), 1e-2});
    EXPECT_NEAR(analytic[i], numeric, tolerance * scale) << what << "[" << i << "]";
  }
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace adamant::testing
