#pragma once
// Helpers for the CUDA kernel tests: host arrays mirrored in GPU memory, normal bf16
// values, random segment layouts with padding gaps, and bitwise comparisons that report
// the worst difference in units in the last place.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/device.h"
#include "adamant/core/half.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "support/gpu.h"

namespace adamant::testing {

// The values of bf16 bit patterns.
inline std::vector<float> bf16_values(const std::vector<std::uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_f32(bits[i]);
  return values;
}

// A host array and its GPU copy. `offset` views start that many elements into the
// allocation, to test accesses that are not 16-byte aligned.
template <typename T>
class MirroredArray {
 public:
  MirroredArray(std::size_t numel, DType dtype, std::size_t offset = 0)
      : host(numel), dtype_(dtype), offset_(offset), device_buffer_((numel + offset) * sizeof(T), gpu()) {}

  void upload() {
    copy_bytes(static_cast<T*>(device_buffer_.data()) + offset_, gpu(), host.data(), Device::cpu(),
               host.size() * sizeof(T));
    // A cudaMemcpy from pageable memory may return before its DMA has landed, and
    // kernels on non-blocking streams are not ordered after it: wait for the device.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> out(host.size());
    copy_bytes(out.data(), Device::cpu(), static_cast<const T*>(device_buffer_.data()) + offset_, gpu(),
               host.size() * sizeof(T));
    return out;
  }
  Tensor device_view() {
    return Tensor::flat(static_cast<T*>(device_buffer_.data()) + offset_, dtype_, gpu(), host.size());
  }
  Tensor host_view() { return Tensor::flat(host.data(), dtype_, Device::cpu(), host.size()); }

  std::vector<T> host;

 private:
  DType dtype_;
  std::size_t offset_;
  Buffer device_buffer_;
};

// n normal values rounded to bf16, as their bit patterns.
inline std::vector<std::uint16_t> normal_bf16(std::size_t n, std::uint64_t seed, double mean, double stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(mean, stddev);
  std::vector<std::uint16_t> bits(n);
  for (auto& b : bits) b = f32_to_bf16(static_cast<float>(normal(rng)));
  return bits;
}

// n normal values rounded to bf16, as floats (the draws of normal_bf16).
inline std::vector<float> rounded_normal(std::size_t n, std::uint64_t seed, double mean, double stddev) {
  return bf16_values(normal_bf16(n, seed, mean, stddev));
}

// The bf16 bit patterns of `values` (rounded to nearest even; exact for bf16-exact values).
inline std::vector<std::uint16_t> to_bf16_bits(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16(values[i]);
  return bits;
}

// A GPU array of `dtype` holding `values` as they are (also kept on the host), `offset`
// elements into its allocation.
template <typename T>
inline MirroredArray<T> on_gpu(const std::vector<T>& values, DType dtype, std::size_t offset = 0) {
  MirroredArray<T> array(values.size(), dtype, offset);
  array.host = values;
  array.upload();
  return array;
}

// A bf16 GPU array holding `bits`, `offset` elements into its allocation.
inline MirroredArray<std::uint16_t> bf16_bits_on_gpu(const std::vector<std::uint16_t>& bits, std::size_t offset = 0) {
  return on_gpu(bits, DType::bf16, offset);
}

// A bf16 GPU array holding `values` rounded to bf16, `offset` elements into its allocation.
inline MirroredArray<std::uint16_t> bf16_on_gpu(const std::vector<float>& values, std::size_t offset = 0) {
  return bf16_bits_on_gpu(to_bf16_bits(values), offset);
}

// An fp32 GPU array holding `values`.
inline MirroredArray<float> f32_on_gpu(const std::vector<float>& values) { return on_gpu(values, DType::f32); }

// The values of a bf16 GPU array.
inline std::vector<float> download_bf16(const MirroredArray<std::uint16_t>& array) {
  return bf16_values(array.download());
}

// Expects |gpu[i] - cpu[i]| <= tolerance(i) everywhere (NaN fails); reports how many
// differ, the first index with both values, and the worst excess.
template <typename Tolerance>
inline void expect_near_all(const std::vector<float>& gpu, const std::vector<float>& cpu, Tolerance tolerance,
                            const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t mismatches = 0;
  std::size_t first = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double difference = std::abs(static_cast<double>(gpu[i]) - static_cast<double>(cpu[i]));
    const double allowed = tolerance(i);
    if (difference <= allowed) continue;
    if (mismatches++ == 0) first = i;
    worst_ratio =
        std::max(worst_ratio, std::isnan(difference) ? std::numeric_limits<double>::infinity() : difference / allowed);
  }
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << gpu.size()
                            << " elements outside the tolerance (worst by x" << worst_ratio << "); first at " << first
                            << ": gpu " << (mismatches ? gpu[first] : 0.0f) << ", cpu "
                            << (mismatches ? cpu[first] : 0.0f) << ", allowed "
                            << (mismatches ? tolerance(first) : 0.0);
}

// A segments table with `count` segments after a head of `first_begin` padding
// elements; gaps of 0..max_gap padding elements between segments; lengths drawn
// log-uniformly from [1, max_length]; a random decay flag; a padding tail.
struct SegmentLayout {
  std::vector<std::int64_t> table;
  std::size_t numel = 0;
};

inline SegmentLayout random_layout(std::mt19937_64& rng, int count, std::int64_t first_begin, int max_gap,
                                   std::int64_t max_length) {
  SegmentLayout layout;
  std::uniform_int_distribution<int> gap(0, max_gap);
  std::uniform_real_distribution<double> log_length(0.0, std::log(static_cast<double>(max_length)));
  std::bernoulli_distribution decay(0.7);
  std::int64_t position = first_begin;
  for (int s = 0; s < count; ++s) {
    const auto length = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::exp(log_length(rng))));
    layout.table.push_back(position);
    layout.table.push_back(position + length);
    layout.table.push_back(decay(rng) ? 1 : 0);
    position += length + gap(rng);
  }
  layout.numel = static_cast<std::size_t>(position + 5);
  return layout;
}

inline int ulp_distance(float a, float b) {
  if (std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return INT32_MAX;
  // Map the sign-magnitude pattern to a monotonic integer line.
  auto line = [](float f) {
    const auto bits = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(f));
    return bits & 0x80000000LL ? -(bits & 0x7fffffffLL) : bits;
  };
  const std::int64_t d = std::llabs(line(a) - line(b));
  return d == 0 ? 1 : static_cast<int>(std::min<std::int64_t>(d, INT32_MAX));  // +0 vs -0 counts as 1
}

// Asserts two fp32 arrays are bitwise equal; on failure says how many differ, where the
// first is, and the largest distance in ulps.
inline void expect_bitwise_equal(const std::vector<float>& actual, const std::vector<float>& expected,
                                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  std::size_t mismatches = 0;
  std::size_t first = 0;
  int worst = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const int d = ulp_distance(actual[i], expected[i]);
    if (d == 0) continue;
    if (mismatches++ == 0) first = i;
    worst = std::max(worst, d);
  }
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << actual.size()
                            << " elements differ, the largest by " << worst << " ulp; first at " << first << " (gpu "
                            << (mismatches ? actual[first] : 0.0f) << ", cpu " << (mismatches ? expected[first] : 0.0f)
                            << ")";
}

inline void expect_bitwise_equal(const std::vector<std::uint16_t>& actual, const std::vector<std::uint16_t>& expected,
                                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  std::size_t mismatches = 0;
  std::size_t first = 0;
  int worst = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == expected[i]) continue;
    if (mismatches++ == 0) first = i;
    worst = std::max(worst, std::abs(static_cast<int>(actual[i]) - static_cast<int>(expected[i])));
  }
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << actual.size()
                            << " 16-bit values differ, the largest by " << worst << " in the bit pattern; first at "
                            << first << " (gpu 0x" << std::hex << (mismatches ? actual[first] : 0) << ", cpu 0x"
                            << (mismatches ? expected[first] : 0) << std::dec << ")";
}

// Values spread over many binades and both signs: magnitude 10^U(lo, hi).
inline float random_magnitude(std::mt19937_64& rng, double lo_exponent, double hi_exponent) {
  std::uniform_real_distribution<double> exponent(lo_exponent, hi_exponent);
  std::bernoulli_distribution negative(0.5);
  const double value = std::pow(10.0, exponent(rng));
  return static_cast<float>(negative(rng) ? -value : value);
}

}  // namespace adamant::testing
