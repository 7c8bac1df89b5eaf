#pragma once
// Shared by the CUDA attention tests (probability kernels and flash attention):
// bf16 inputs, NaN-poisoned outputs, the bf16 error bound and the CPU's dropout mask.
// Tolerance: |gpu - cpu| <= kBoundFactor * 2^-8 * (|cpu| + magnitude) + kAbsoluteSlack,
// where magnitude is the same computation on absolute values (bf16 rounding of the
// inputs' products and of the output).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/dropout.h"
#include "attention_dropout_reference.h"
#include "kernels/cuda_test_util.h"

namespace adamant::kernels::attention_testing {

using testing::bf16_on_gpu;
using testing::f32_on_gpu;
using testing::MirroredArray;

constexpr double kBf16Rounding = 1.0 / 256.0;  // largest relative rounding error of bf16 (half of 2^-7)
constexpr double kBoundFactor = 1.5;
constexpr double kAbsoluteSlack = 1e-5;

// One parametrised case: a shape and an attention dropout probability.
struct AttentionCase {
  AttentionShape shape;
  float dropout;
};

inline std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) {
  const AttentionShape& s = info.param.shape;
  std::ostringstream name;
  name << "b" << s.batch << "_seq" << s.seq << "_h" << s.heads << "_d" << s.head_dim << "_drop"
       << static_cast<int>(std::lround(info.param.dropout * 100));
  return name.str();
}

inline std::vector<float> random_bf16_values(std::size_t n, std::uint32_t seed, double scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> values(n);
  for (float& v : values) v = bf16_to_f32(f32_to_bf16(static_cast<float>(normal(rng))));
  return values;
}

// Filled with NaN, so that any element a kernel fails to write shows.
inline MirroredArray<std::uint16_t> poisoned_bf16(std::size_t n) {
  MirroredArray<std::uint16_t> array(n, DType::bf16);
  std::fill(array.host.begin(), array.host.end(), std::uint16_t{0x7fc0});
  array.upload();
  return array;
}
inline MirroredArray<float> poisoned_floats(std::size_t n) {
  MirroredArray<float> array(n, DType::f32);
  std::fill(array.host.begin(), array.host.end(), NAN);
  array.upload();
  return array;
}

inline std::vector<float> download_floats(const MirroredArray<std::uint16_t>& array) {
  return testing::bf16_values(array.download());
}

inline Tensor host_tensor(std::vector<float>& values) {
  return Tensor::flat(values.data(), DType::f32, Device::cpu(), values.size());
}

// Expects |actual - expected| <= bound[i] for every element (NaN fails); on failure
// reports how many differ and the first and the worst of them.
inline void expect_within(const std::vector<float>& actual, const std::vector<float>& expected,
                          const std::vector<double>& bound, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  ASSERT_EQ(bound.size(), expected.size()) << what;
  std::size_t failures = 0, first = 0, worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double error = std::abs(static_cast<double>(actual[i]) - static_cast<double>(expected[i]));
    const double ratio = std::isfinite(actual[i]) ? error / bound[i] : INFINITY;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
    if (ratio <= 1.0) continue;
    if (failures++ == 0) first = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << actual.size()
                          << " elements outside the bound; first at " << first << " (got " << actual[first]
                          << ", expected " << expected[first] << "), worst at " << worst << " (got " << actual[worst]
                          << ", expected " << expected[worst] << ", " << worst_ratio << " times the bound)";
}

// The bf16 bound: kBoundFactor * 2^-8 * (|expected| + magnitude) + kAbsoluteSlack.
inline void expect_within_bf16_bound(const std::vector<float>& actual, const std::vector<float>& expected,
                                     const std::vector<double>& magnitude, const std::string& what) {
  std::vector<double> bound(expected.size());
  for (std::size_t i = 0; i < bound.size(); ++i) {
    bound[i] =
        kBoundFactor * kBf16Rounding * (std::abs(static_cast<double>(expected[i])) + magnitude[i]) + kAbsoluteSlack;
  }
  expect_within(actual, expected, bound, what);
}

// The dropout factor (0 or the keep scale) of one attention element, as the CPU kernel draws it.
inline float dropout_factor(const DropoutArgs& args, const AttentionShape& s, std::int64_t b, std::int64_t h,
                            std::int64_t i, std::int64_t j) {
  if (args.probability <= 0.0f) return 1.0f;
  const bool keep = testing::attention_dropout_keeps(args, s.seq, b, h, i, j);
  return keep ? static_cast<float>(testing::attention_dropout_keep_scale(args.probability)) : 0.0f;
}

}  // namespace adamant::kernels::attention_testing
