// Element-wise model kernels: GELU, dropout, residual add.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

namespace {

// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation.
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;
constexpr double kGeluCubic = 0.044715;

template <typename T>
T gelu_value(T v, GeluForm form) {
  if (form == GeluForm::tanh) {
    const T inner = static_cast<T>(kSqrt2OverPi) * (v + static_cast<T>(kGeluCubic) * v * v * v);
    return T(0.5) * v * (T(1) + std::tanh(inner));
  }
  return T(0.5) * v * (T(1) + std::erf(v * static_cast<T>(1.0 / std::numbers::sqrt2)));
}

template <typename T>
T gelu_derivative(T v, GeluForm form) {
  if (form == GeluForm::tanh) {
    // d/dx [0.5 x (1 + tanh(u))] = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx
    const T inner = static_cast<T>(kSqrt2OverPi) * (v + static_cast<T>(kGeluCubic) * v * v * v);
    const T t = std::tanh(inner);
    const T d_inner = static_cast<T>(kSqrt2OverPi) * (T(1) + T(3) * static_cast<T>(kGeluCubic) * v * v);
    return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * d_inner;
  }
  // d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
  const T cdf = T(0.5) * (T(1) + std::erf(v * static_cast<T>(1.0 / std::numbers::sqrt2)));
  const T pdf = static_cast<T>(std::numbers::inv_sqrtpi / std::numbers::sqrt2) * std::exp(T(-0.5) * v * v);
  return cdf + v * pdf;
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor out, std::int64_t n, GeluForm form) {
  with_float_type(x, [&]<typename T>() {
    const T* x_data = x.ptr<T>();
    T* out_data = out.ptr<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelMinWork)
    for (std::int64_t i = 0; i < n; ++i) out_data[i] = gelu_value(x_data[i], form);
  });
}

void gelu_backward(const Tensor& d_out, const Tensor& x, Tensor d_x, Tensor out, std::int64_t n, GeluForm form) {
  with_float_type(x, [&]<typename T>() {
    const T* dy = d_out.ptr<T>();
    const T* x_data = x.ptr<T>();
    T* dx = d_x.ptr<T>();
    T* out_data = out.data != nullptr ? out.ptr<T>() : nullptr;
#pragma omp parallel for schedule(static) if (n >= kParallelMinWork)
    for (std::int64_t i = 0; i < n; ++i) {
      const T v = x_data[i];
      if (out_data != nullptr) out_data[i] = gelu_value(v, form);
      dx[i] = dy[i] * gelu_derivative(v, form);
    }
  });
}

void dropout(const Tensor& in, Tensor out, std::int64_t numel, std::int64_t sample_numel, const DropoutArgs& given) {
  const DropoutArgs args = with_sample_offset(given);
  with_float_type(in, [&]<typename T>() {
    const T* src = in.ptr<T>();
    T* dst = out.ptr<T>();
    if (numel <= 0) return;
    if (args.probability <= 0.0f) {
      if (src != dst) std::copy(src, src + numel, dst);
      return;
    }
    const T keep_scale = T(1) / (T(1) - static_cast<T>(args.probability));
    // Walk the Philox groups of the whole batch that overlap [first, end) (global
    // element indices); a sample's last group is short when sample_numel % 4 != 0.
    const auto first = static_cast<std::int64_t>(args.first_element);
    const std::int64_t end = first + numel;
    const std::int64_t groups_per_sample = (sample_numel + kDropoutGroup - 1) / kDropoutGroup;
    auto group_of = [&](std::int64_t element) {
      return (element / sample_numel) * groups_per_sample + (element % sample_numel) / kDropoutGroup;
    };
    const std::int64_t group_begin = group_of(first);
    const std::int64_t group_end = group_of(end - 1) + 1;
#pragma omp parallel for schedule(static) if (numel >= kParallelMinWork)
    for (std::int64_t g = group_begin; g < group_end; ++g) {
      const std::int64_t sample = g / groups_per_sample;
      const std::int64_t group = g - sample * groups_per_sample;
      const PhiloxCounter bits =
          dropout_bits(args, static_cast<std::uint64_t>(sample), static_cast<std::uint64_t>(group));
      const std::int64_t group_start = sample * sample_numel + group * kDropoutGroup;
      const std::int64_t lo = std::max(first, group_start);
      const std::int64_t hi = std::min({end, (sample + 1) * sample_numel, group_start + kDropoutGroup});
      for (std::int64_t e = lo; e < hi; ++e) {
        const std::int64_t i = e - first;
        dst[i] = dropout_keeps(bits[e - group_start], args.probability) ? src[i] * keep_scale : T(0);
      }
    }
  });
}

void residual_add(const Tensor& a, const Tensor& b, Tensor out, std::int64_t n) {
  with_float_type(a, [&]<typename T>() {
    const T* a_data = a.ptr<T>();
    const T* b_data = b.ptr<T>();
    T* out_data = out.ptr<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelMinWork)
    for (std::int64_t i = 0; i < n; ++i) out_data[i] = a_data[i] + b_data[i];
  });
}

}  // namespace adamant::kernels::cpu
