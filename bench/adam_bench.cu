// Benchmark of the CUDA optimizer kernels on the GPT-3 1.3B parameter layout
// (one flat shard, 292 segments), against the device-to-device copy ceiling.
// Times the same launch functions the kernels/ API calls (kernels/cuda/launchers.h),
// with CUDA events: 3 warm-up runs, then the median of --reps runs. Bytes counted
// are everything each kernel reads plus everything it writes. The remainder variant is also
// timed on a few SMs (--sms), as it would run beside other kernels: adam_bulk (its operands moved
// by bulk copies, what the optimizer runs there) and the plain kernel on a grid capped to as
// many threads.
//
//   adam_bench [--reps 20] [--sms 16,24,32] [--json out.json]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "adam_constants.h"
#include "adamant/kernels/cuda/launchers.h"
#include "bench_flags.h"
#include "cuda_bench_util.cuh"

namespace {

using adamant::DType;
namespace launchers = adamant::kernels::cuda::launchers;

using adamant::bench::check;
using adamant::bench::DeviceArray;

// The GPT-3 1.3B parameters (24 layers, hidden 2048, vocab 50304, sequence 2048)
// packed back to back: (begin, end, decay) per tensor; biases and layernorms do not decay.
std::vector<std::int64_t> gpt3_1p3b_segments() {
  constexpr std::int64_t hidden = 2048, vocab = 50304, sequence = 2048, layers = 24, ffn = 4 * hidden;
  std::vector<std::int64_t> table;
  std::int64_t position = 0;
  auto add = [&](std::int64_t size, bool decay) {
    table.push_back(position);
    table.push_back(position + size);
    table.push_back(decay ? 1 : 0);
    position += size;
  };
  add(vocab * hidden, true);
  add(sequence * hidden, true);
  for (int layer = 0; layer < layers; ++layer) {
    add(hidden, false);  // ln1 weight, bias
    add(hidden, false);
    add(3 * hidden * hidden, true);  // qkv
    add(3 * hidden, false);
    add(hidden * hidden, true);  // attention output
    add(hidden, false);
    add(hidden, false);  // ln2
    add(hidden, false);
    add(ffn * hidden, true);  // fc1
    add(ffn, false);
    add(hidden * ffn, true);  // fc2
    add(hidden, false);
  }
  add(hidden, false);  // final layernorm
  add(hidden, false);
  return table;
}

// x = lo + (hi - lo) * u, u uniform in [0, 1): random, non-zero data for timing.
__global__ void fill_uniform(float* x, std::int64_t n, std::uint64_t seed, float lo, float hi) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    x[i] = lo + (hi - lo) * adamant::bench::hashed_unit(i, seed);
  }
}

// bf16 high halves and remainders of fp32 weights; bf16 copies of fp32 gradients.
__global__ void split_weights(const float* p, std::uint16_t* high, std::uint16_t* low, const float* g,
                              std::uint16_t* g_bf16, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t bits = __float_as_uint(p[i]);
    const auto h = static_cast<std::uint16_t>((bits + 0x8000u) >> 16);
    high[i] = h;
    low[i] = static_cast<std::uint16_t>(bits - (static_cast<std::uint32_t>(h) << 16));
    g_bf16[i] = static_cast<std::uint16_t>(__float_as_uint(g[i]) >> 16);
  }
}

struct Result {
  std::string name;
  double bytes_per_weight;
  double ms_median;
  double ms_min;
  double tbps;
};

// Median and minimum of `reps` timed runs after 3 warm-ups.
Result time_it(const std::string& name, double bytes, double weights, int reps, const std::function<void()>& run) {
  const std::vector<float> times = adamant::bench::sorted_times_ms(reps, run);
  const double median = times[times.size() / 2];
  Result r{name, bytes / weights, median, times.front(), bytes / (median * 1e-3) / 1e12};
  std::printf("%-44s %8.3f ms (min %8.3f)  %6.1f B/weight  %5.2f TB/s\n", name.c_str(), r.ms_median, r.ms_min,
              r.bytes_per_weight, r.tbps);
  std::fflush(stdout);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const adamant::bench::BenchFlags flags(argc, argv, "adam_bench", "[--reps N] [--sms LIST] [--json PATH]",
                                         {"--reps", "--sms", "--json"});
  const int reps = flags.whole_number("--reps", 20, 1);
  const std::vector<int> sm_counts = flags.whole_numbers("--sms", "16,24,32", 1);
  const std::string json_path = flags.text("--json", "");

  const std::vector<std::int64_t> table = gpt3_1p3b_segments();
  const std::int64_t n = table[table.size() - 2];
  const auto weights = static_cast<double>(n);
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  std::printf("device: %s, %d SMs; GPT-3 1.3B layout: %lld weights in %zu segments\n", props.name,
              props.multiProcessorCount, static_cast<long long>(n), table.size() / 3);

  DeviceArray segments(table.size() * sizeof(std::int64_t));
  check(cudaMemcpy(segments.as<void>(), table.data(), segments.bytes(), cudaMemcpyHostToDevice), "upload segments");
  DeviceArray param(n * 4), grad(n * 4), exp_avg(n * 4), exp_avg_sq(n * 4);
  DeviceArray grad_bf16(n * 2), model(n * 2), high(n * 2), low(n * 2);
  const int fill_grid = props.multiProcessorCount * 8;
  fill_uniform<<<fill_grid, 256>>>(param.as<float>(), n, 1, -0.05f, 0.05f);
  fill_uniform<<<fill_grid, 256>>>(grad.as<float>(), n, 2, -1e-3f, 1e-3f);
  fill_uniform<<<fill_grid, 256>>>(exp_avg.as<float>(), n, 3, -1e-4f, 1e-4f);
  fill_uniform<<<fill_grid, 256>>>(exp_avg_sq.as<float>(), n, 4, 1e-10f, 1e-8f);
  split_weights<<<fill_grid, 256>>>(param.as<float>(), high.as<std::uint16_t>(), low.as<std::uint16_t>(),
                                    grad.as<float>(), grad_bf16.as<std::uint16_t>(), n);
  check(cudaGetLastError(), "fill kernels");
  check(cudaDeviceSynchronize(), "fill kernels");

  std::vector<Result> results;
  {  // The ceiling: a device-to-device copy of 4 GiB.
    const std::size_t copy_bytes = std::size_t{1} << 32;
    DeviceArray from(copy_bytes), to(copy_bytes);
    results.push_back(time_it("device-to-device copy (4 GiB)", 2.0 * copy_bytes, copy_bytes / 4.0, reps, [&] {
      check(cudaMemcpyAsync(to.as<void>(), from.as<void>(), copy_bytes, cudaMemcpyDeviceToDevice), "copy");
    }));
  }

  const launchers::AdamConstants c = adamant::bench::adam_constants_for_timing();
  const launchers::LaunchShape shape{props.multiProcessorCount, true};

  // The operands of each variant over the same arrays.
  auto operands = [&](DType grad_dtype, launchers::ModelCopy copy, bool remainder) {
    launchers::AdamOperands ops{};
    ops.segments = segments.as<std::int64_t>();
    ops.num_segments = static_cast<int>(table.size() / 3);
    ops.numel = n;
    ops.grad = grad_dtype == DType::f32 ? grad.as<void>() : grad_bf16.as<void>();
    ops.main_param = remainder ? nullptr : param.as<float>();
    ops.remainder = remainder ? low.as<std::uint16_t>() : nullptr;
    ops.exp_avg = exp_avg.as<float>();
    ops.exp_avg_sq = exp_avg_sq.as<float>();
    ops.model_param = remainder ? high.as<void>() : (copy == launchers::ModelCopy::none ? nullptr : model.as<void>());
    return ops;
  };
  auto adam_case = [&](const char* name, double bytes_per_weight, DType grad_dtype, launchers::ModelCopy copy,
                       bool remainder) {
    const launchers::AdamOperands ops = operands(grad_dtype, copy, remainder);
    results.push_back(time_it(name, bytes_per_weight * weights, weights, reps, [&] {
      check(launchers::adam(ops, grad_dtype, copy, remainder, c, shape, nullptr), "adam");
    }));
  };
  // fp32 grad 4 r, main 4 r + 4 w, m and v 8 r + 8 w: 28; + bf16 copy 2 w: 30.
  adam_case("adam fp32 grad, no copy (as PyTorch)", 28, DType::f32, launchers::ModelCopy::none, false);
  adam_case("adam fp32 grad + bf16 copy (O2)", 30, DType::f32, launchers::ModelCopy::bf16, false);
  adam_case("adam bf16 grad + bf16 copy (O2)", 26, DType::bf16, launchers::ModelCopy::bf16, false);
  // bf16 weight 2 r + 2 w, remainder 2 r + 2 w, m and v 16, grad 4 or 2.
  adam_case("adam remainders, fp32 grad", 28, DType::f32, launchers::ModelCopy::bf16, true);
  adam_case("adam remainders, bf16 grad", 26, DType::bf16, launchers::ModelCopy::bf16, true);
  for (const int sms : sm_counts) {
    const launchers::AdamOperands ops = operands(DType::f32, launchers::ModelCopy::bf16, true);
    const std::string name = "adam remainders, fp32 grad, " + std::to_string(sms) + " SMs";
    results.push_back(time_it(name + " (bulk)", 28 * weights, weights, reps,
                              [&] { check(launchers::adam_bulk(ops, DType::f32, c, sms, nullptr), "adam_bulk"); }));
    // The plain kernel's grid for that many SMs (as many threads an SM as the bulk kernel's block).
    const launchers::LaunchShape capped{sms, shape.vectorized};
    results.push_back(time_it(name + " (plain)", 28 * weights, weights, reps, [&] {
      check(launchers::adam(ops, DType::f32, launchers::ModelCopy::bf16, true, c, capped, nullptr), "adam");
    }));
  }

  DeviceArray partials(launchers::kMaxSquaredNormPartials * sizeof(double)), norm(sizeof(double));
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const void* x = dtype == DType::f32 ? grad.as<void>() : grad_bf16.as<void>();
    results.push_back(time_it(dtype == DType::f32 ? "squared_norm fp32" : "squared_norm bf16",
                              static_cast<double>(adamant::dtype_size(dtype)) * weights, weights, reps, [&] {
                                check(launchers::squared_norm(x, dtype, n, segments.as<std::int64_t>(),
                                                              static_cast<int>(table.size() / 3), partials.as<double>(),
                                                              norm.as<double>(), false, shape, nullptr),
                                      "squared_norm");
                              }));
  }
  results.push_back(time_it("cast fp32 -> bf16", 6 * weights, weights, reps, [&] {
    check(launchers::cast(param.as<void>(), DType::f32, model.as<void>(), DType::bf16, n, shape, nullptr), "cast");
  }));
  results.push_back(time_it("accumulate bf16 into fp32", 10 * weights, weights, reps, [&] {
    check(launchers::accumulate(grad_bf16.as<void>(), DType::bf16, exp_avg.as<void>(), DType::f32, n, shape, nullptr),
          "accumulate");
  }));
  check(cudaDeviceSynchronize(), "benchmarks");

  if (!json_path.empty()) {
    FILE* out = std::fopen(json_path.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "adam_bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(out, "{\"device\": \"%s\", \"weights\": %lld, \"results\": [\n", props.name,
                 static_cast<long long>(n));
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(out,
                   "  {\"name\": \"%s\", \"bytes_per_weight\": %.1f, \"ms_median\": %.4f, \"ms_min\": %.4f, "
                   "\"tbps\": %.4f}%s\n",
                   r.name.c_str(), r.bytes_per_weight, r.ms_median, r.ms_min, r.tbps,
                   i + 1 < results.size() ? "," : "");
    }
    std::fprintf(out, "]}\n");
    std::fclose(out);
  }
  return 0;
}
