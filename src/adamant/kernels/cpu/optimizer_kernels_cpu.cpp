// CPU reference optimizer kernels: plain fp32 maths per element, OpenMP over
// elements. These are the readable versions the CUDA kernels are tested against.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/cpu/model_kernels_cpu.h"

namespace adamant::kernels::cpu {

namespace {

// Reads element i of a flat fp32 / bf16 / fp16 view as fp32.
float load_as_f32(const Tensor& x, std::size_t i) {
  switch (x.dtype) {
    case DType::f32:
      return static_cast<const float*>(x.data)[i];
    case DType::bf16:
      return bf16_to_f32(static_cast<const bf16_bits*>(x.data)[i]);
    case DType::f16:
      return f16_to_f32(static_cast<const f16_bits*>(x.data)[i]);
    default:
      fail("optimizer kernel: unsupported element type {}", dtype_name(x.dtype));
  }
}

// The segments table as a span, validated once (OpenMP regions must not throw).
std::span<const std::int64_t> checked_segments(const Tensor& segments, std::size_t numel, const char* what) {
  const std::span<const std::int64_t> table(segments.ptr<std::int64_t>(), segments.numel());
  std::int64_t previous_end = 0;
  for (std::size_t s = 0; s < table.size(); s += 3) {
    const std::int64_t begin = table[s];
    const std::int64_t end = table[s + 1];
    ADAMANT_CHECK(begin >= previous_end && begin <= end && end <= static_cast<std::int64_t>(numel),
                  "{}: segment {} = [{}, {}) is unsorted, overlapping or outside the shard of {} elements", what, s / 3,
                  begin, end, numel);
    previous_end = end;
  }
  return table;
}

// Calls body(i, decay) for every element i of every segment, in parallel. The
// threads share each segment's range; segments are disjoint, so no two threads
// touch the same element.
template <typename Body>
void for_each_segment_element(std::span<const std::int64_t> segments, Body body) {
#pragma omp parallel
  for (std::size_t s = 0; s < segments.size(); s += 3) {
    const std::int64_t begin = segments[s];
    const std::int64_t end = segments[s + 1];
    const bool decay = segments[s + 2] != 0;
#pragma omp for schedule(static) nowait
    for (std::int64_t i = begin; i < end; ++i) body(static_cast<std::size_t>(i), decay);
  }
}

// Per-step constants of adam.h, computed once. The bias corrections are formed
// in double from the fp32 betas and rounded to fp32 (as Apex computes them on
// the host), so every backend uses the same fp32 constants.
struct AdamConstants {
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;
  bool adamw;

  explicit AdamConstants(const AdamArgs& args)
      : lr(args.lr),
        beta1(args.beta1),
        beta2(args.beta2),
        one_minus_beta1(1.0f - args.beta1),
        one_minus_beta2(1.0f - args.beta2),
        eps(args.eps),
        weight_decay(args.weight_decay),
        grad_scale(args.grad_scale),
        bias_correction1(static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta1), args.step))),
        bias_correction2(static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta2), args.step))),
        adamw(args.adamw) {}
};

// Takes AdamArgs::step_factor's grad scale where it is set; false where it says to skip the step.
bool take_step_factor(const AdamArgs& args, AdamConstants& constants) {
  if (args.step_factor.data == nullptr) return true;
  const float* factor = args.step_factor.ptr<float>();
  if (factor[1] != 0.0f) return false;
  constants.grad_scale = factor[0];
  return true;
}

// One element of adam.h, in fp32. Both adam variants call this, so they agree bitwise.
inline float adam_element(const AdamConstants& c, float grad, bool decay, float param, float& exp_avg,
                          float& exp_avg_sq) {
  const float wd = decay ? c.weight_decay : 0.0f;
  float g = grad * c.grad_scale;
  if (!c.adamw && decay) g += wd * param;
  exp_avg = c.beta1 * exp_avg + c.one_minus_beta1 * g;
  exp_avg_sq = c.beta2 * exp_avg_sq + c.one_minus_beta2 * g * g;
  const float denom = std::sqrt(exp_avg_sq / c.bias_correction2) + c.eps;
  float update = (exp_avg / c.bias_correction1) / denom;
  if (c.adamw && decay) update += wd * param;
  return param - c.lr * update;
}

}  // namespace

void adam_step(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor main_param, Tensor exp_avg,
               Tensor exp_avg_sq, Tensor model_param) {
  const std::size_t n = main_param.numel();
  const auto table = checked_segments(segments, n, "adam");
  AdamConstants constants(args);
  if (!take_step_factor(args, constants)) return;
  float* const main = main_param.ptr<float>();
  float* const m = exp_avg.ptr<float>();
  float* const v = exp_avg_sq.ptr<float>();
  const DType model_dtype = model_param.data == nullptr ? DType::f32 : model_param.dtype;
  const bool grad_is_bf16 = grad.dtype == DType::bf16;
  const auto* grad_f32 = static_cast<const float*>(grad.data);
  const auto* grad_bf16 = static_cast<const bf16_bits*>(grad.data);
  void* const model = model_param.data;

  for_each_segment_element(table, [&](std::size_t i, bool decay) {
    const float g = grad_is_bf16 ? bf16_to_f32(grad_bf16[i]) : grad_f32[i];
    const float p = adam_element(constants, g, decay, main[i], m[i], v[i]);
    main[i] = p;
    if (model == nullptr) return;
    switch (model_dtype) {
      case DType::bf16:
        static_cast<bf16_bits*>(model)[i] = bf16_round_for_remainder(p);
        break;
      case DType::f16:
        static_cast<f16_bits*>(model)[i] = f32_to_f16(p);
        break;
      default:
        static_cast<float*>(model)[i] = p;
        break;
    }
  });
}

void adam_step_remainder(const AdamArgs& args, const Tensor& segments, const Tensor& grad, Tensor remainder,
                         Tensor exp_avg, Tensor exp_avg_sq, Tensor model_param) {
  const std::size_t n = remainder.numel();
  const auto table = checked_segments(segments, n, "adam_step_remainder");
  AdamConstants constants(args);
  if (!take_step_factor(args, constants)) return;
  auto* const low = remainder.ptr<std::uint16_t>();
  auto* const high = model_param.ptr<std::uint16_t>();
  float* const m = exp_avg.ptr<float>();
  float* const v = exp_avg_sq.ptr<float>();
  const bool grad_is_bf16 = grad.dtype == DType::bf16;
  const auto* grad_f32 = static_cast<const float*>(grad.data);
  const auto* grad_bf16 = static_cast<const bf16_bits*>(grad.data);

  for_each_segment_element(table, [&](std::size_t i, bool decay) {
    const float g = grad_is_bf16 ? bf16_to_f32(grad_bf16[i]) : grad_f32[i];
    const float p = adam_element(constants, g, decay, join_remainder(high[i], low[i]), m[i], v[i]);
    const bf16_bits rounded = bf16_round_for_remainder(p);
    high[i] = rounded;
    low[i] = remainder_of(p, rounded);
  });
}

void resolve_step_factor(const Tensor& squared_norm, const StepFactorInputs& inputs, Tensor factor) {
  const StepFactor resolved = step_factor_of(*squared_norm.ptr<double>(), inputs);
  factor.ptr<float>()[0] = resolved.adam_grad_scale;
  factor.ptr<float>()[1] = resolved.finite ? 0.0f : 1.0f;
}

void squared_norm(const Tensor& x, const Tensor& segments, Tensor out, bool accumulate) {
  const auto table = checked_segments(segments, x.numel(), "squared_norm");
  std::size_t total = 0;
  for (std::size_t s = 0; s < table.size(); s += 3) total += static_cast<std::size_t>(table[s + 1] - table[s]);

  // Deterministic for any thread count: the concatenated segment elements are cut
  // into fixed chunks whose size depends only on `total`; each chunk is summed in
  // order in double, then the chunk sums are added in chunk order.
  constexpr std::size_t kMaxChunks = 1024;
  constexpr std::size_t kMinChunk = 4096;
  const std::size_t chunk = std::max(kMinChunk, (total + kMaxChunks - 1) / kMaxChunks);
  const std::size_t chunk_count = (total + chunk - 1) / chunk;
  std::array<double, kMaxChunks> chunk_sums{};
  const bool is_bf16 = x.dtype == DType::bf16;
  const auto* f32 = static_cast<const float*>(x.data);
  const auto* bf16 = static_cast<const bf16_bits*>(x.data);

#pragma omp parallel for schedule(static)
  for (std::size_t c = 0; c < chunk_count; ++c) {
    const std::size_t chunk_begin = c * chunk;
    const std::size_t chunk_end = std::min(total, chunk_begin + chunk);
    double sum = 0.0;
    std::size_t logical = 0;  // position of the current segment in the concatenation
    for (std::size_t s = 0; s < table.size() && logical < chunk_end; s += 3) {
      const auto begin = static_cast<std::size_t>(table[s]);
      const auto length = static_cast<std::size_t>(table[s + 1]) - begin;
      const std::size_t from = std::max(logical, chunk_begin);
      const std::size_t to = std::min(logical + length, chunk_end);
      for (std::size_t l = from; l < to; ++l) {
        const std::size_t i = begin + (l - logical);
        const double value = is_bf16 ? bf16_to_f32(bf16[i]) : f32[i];
        sum += value * value;
      }
      logical += length;
    }
    chunk_sums[c] = sum;
  }
  double result = 0.0;
  for (std::size_t c = 0; c < chunk_count; ++c) result += chunk_sums[c];
  double* const out_value = out.ptr<double>();
  if (accumulate) result += *out_value;
  *out_value = result;
}

void cast(const Tensor& src, Tensor dst) {
  const std::size_t n = src.numel();
  if (src.dtype == dst.dtype) {
    std::memcpy(dst.data, src.data, src.bytes());
    return;
  }
  switch (dst.dtype) {
    case DType::f32: {
      float* const out = dst.ptr<float>();
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n; ++i) out[i] = load_as_f32(src, i);
      break;
    }
    case DType::bf16: {
      auto* const out = static_cast<bf16_bits*>(dst.data);
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(load_as_f32(src, i));
      break;
    }
    default: {
      auto* const out = static_cast<f16_bits*>(dst.data);
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_f16(load_as_f32(src, i));
      break;
    }
  }
}

void fill_zero(Tensor x) { std::memset(x.data, 0, x.bytes()); }

void scale(Tensor x, float s) {
  const std::size_t n = x.numel();
  switch (x.dtype) {
    case DType::f32: {
      float* const data = x.ptr<float>();
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n; ++i) data[i] *= s;
      break;
    }
    case DType::bf16: {
      auto* const data = static_cast<bf16_bits*>(x.data);
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n; ++i) data[i] = f32_to_bf16(bf16_to_f32(data[i]) * s);
      break;
    }
    default: {
      auto* const data = static_cast<f16_bits*>(x.data);
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n; ++i) data[i] = f32_to_f16(f16_to_f32(data[i]) * s);
      break;
    }
  }
}

void accumulate(const Tensor& src, Tensor dst) {
  const std::size_t n = src.numel();
  if (dst.dtype == DType::f64) {
    double* const out = dst.ptr<double>();
    const double* const in = src.ptr<double>();
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) out[i] += in[i];
    return;
  }
  if (dst.dtype == DType::bf16) {  // a bf16 gradient buffer: each sum rounded once
    auto* const out = static_cast<bf16_bits*>(dst.data);
    const float* const in = src.ptr<float>();
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(bf16_to_f32(out[i]) + in[i]);
    return;
  }
  float* const out = dst.ptr<float>();
  if (src.dtype == DType::f32) {
    const float* const in = src.ptr<float>();
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) out[i] += in[i];
  } else {
    const auto* const in = static_cast<const bf16_bits*>(src.data);
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) out[i] += bf16_to_f32(in[i]);
  }
}

}  // namespace adamant::kernels::cpu
