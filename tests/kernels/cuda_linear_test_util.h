#pragma once
// What the CUDA GEMM and linear-layer tests share: random bf16-representable inputs, GPU
// copies of host matrices, and the per-element comparison with a tolerance relative to the
// value and to the product's magnitude (cuda_linear_test.cpp says how the tolerances follow).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/half.h"
#include "kernels/cuda_test_util.h"

namespace adamant::testing {

constexpr double kBf16OutputRelative = 1.0 / 256;
constexpr double kAccumulation = 1e-4;

// Normal values with standard deviation `scale`, rounded to bf16 when `round`.
inline std::vector<float> random_values(std::size_t n, std::mt19937_64& rng, float scale, bool round) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(n);
  for (float& v : values) {
    v = normal(rng);
    if (round) v = bf16_to_f32(f32_to_bf16(v));
  }
  return values;
}

inline std::vector<float> absolute(std::vector<float> values) {
  for (float& v : values) v = std::abs(v);
  return values;
}

// A host array in GPU memory as bf16 or fp32 (values already representable).
class DeviceMatrix {
 public:
  DeviceMatrix(const std::vector<float>& values, DType dtype, std::size_t offset = 0)
      : dtype_(dtype),
        f32_(dtype == DType::f32 ? values.size() : 0, DType::f32, offset),
        bf16_(dtype == DType::bf16 ? values.size() : 0, DType::bf16, offset) {
    if (dtype == DType::f32) {
      f32_.host = values;
      f32_.upload();
    } else {
      for (std::size_t i = 0; i < values.size(); ++i) bf16_.host[i] = f32_to_bf16(values[i]);
      bf16_.upload();
    }
  }
  Tensor view() { return dtype_ == DType::f32 ? f32_.device_view() : bf16_.device_view(); }
  std::vector<float> download() const {
    if (dtype_ == DType::f32) return f32_.download();
    return bf16_values(bf16_.download());
  }

 private:
  DType dtype_;
  MirroredArray<float> f32_;
  MirroredArray<std::uint16_t> bf16_;
};

// |gpu - cpu| <= relative * |cpu| + absolute[i] for every element; on failure reports the
// count, the first and the worst index with both values.
inline void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double relative,
                         const std::vector<double>& absolute, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  ASSERT_EQ(absolute.size(), cpu.size()) << what;
  std::size_t failures = 0, first = 0, worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double tolerance = relative * std::abs(cpu[i]) + absolute[i] + 1e-30;
    const double error = std::abs(static_cast<double>(gpu[i]) - cpu[i]);
    const double ratio = std::isnan(error) ? std::numeric_limits<double>::infinity() : error / tolerance;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = i;
    }
    if (ratio > 1.0 && failures++ == 0) first = i;
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " of " << gpu.size() << " outside tolerance; first at "
                          << first << " (gpu " << gpu[first] << ", cpu " << cpu[first] << ", tolerance "
                          << absolute[first] << " absolute), worst at " << worst << " (gpu " << gpu[worst] << ", cpu "
                          << cpu[worst] << ", " << worst_ratio << " x the tolerance)";
}

// A product's tolerance: relative to the value, and `accumulation` times the product's
// magnitude (the same product on absolute values) for the order of its sums.
inline void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                         const std::vector<float>& magnitude, double relative, double accumulation,
                         const std::string& what) {
  std::vector<double> absolute(magnitude.size());
  for (std::size_t i = 0; i < magnitude.size(); ++i) absolute[i] = accumulation * magnitude[i];
  expect_close(gpu, cpu, relative, absolute, what);
}

}  // namespace adamant::testing
