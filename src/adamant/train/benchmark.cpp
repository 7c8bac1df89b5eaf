#include "adamant/train/benchmark.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "adamant/core/error.h"

namespace adamant::train {

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

TrainConfig benchmark_config(TrainConfig config, const BenchmarkOptions& options,
                             const std::filesystem::path& run_root) {
  ADAMANT_CHECK(options.steps >= 1, "--steps is {}; time at least one step", options.steps);
  ADAMANT_CHECK(options.warmup_steps >= 0, "--warmup is {}; use 0 or more steps", options.warmup_steps);
  config.trainer.max_steps = options.warmup_steps + options.steps;
  config.trainer.val_check_interval = config.trainer.max_steps;  // positive, and with no validation batches a no-op
  config.trainer.limit_val_batches = 0;
  config.exp_manager.create_checkpoint_callback = false;
  config.exp_manager.resume_if_exists = false;
  config.exp_manager.exp_dir = run_root;
  return config;
}

BenchmarkResult run_benchmark(const TrainConfig& config, const BenchmarkOptions& options,
                              const TrainOptions& train_options) {
  const TrainSummary summary = run_training(config, train_options);
  const auto timed = static_cast<std::ptrdiff_t>(options.warmup_steps);
  ADAMANT_CHECK(summary.step_seconds.size() == static_cast<std::size_t>(options.warmup_steps + options.steps),
                "bench: {} steps ran, {} expected", summary.step_seconds.size(), options.warmup_steps + options.steps);
  const model::GptConfig& m = config.model;
  BenchmarkResult r;
  r.steps = options.steps;
  r.step_ms = 1e3 * median({summary.step_seconds.begin() + timed, summary.step_seconds.end()});
  int world = 1;
  MPI_Comm_size(train_options.world, &world);
  r.world_size = world;
  r.tensor_parallel_size = m.tensor_parallel_size;
  r.pipeline_parallel_size = m.pipeline_parallel_size;
  r.data_parallel_size = world / (m.tensor_parallel_size * m.pipeline_parallel_size);
  const double tokens_per_step = static_cast<double>(config.data.global_batch_size) * m.seq_length;
  r.tokens_per_second = tokens_per_step / (r.step_ms / 1e3);
  r.tokens_per_second_per_device = r.tokens_per_second / world;
  r.exposed_comm_ms = median({summary.exposed_comm_ms.begin() + timed, summary.exposed_comm_ms.end()});
  r.first_loss = summary.train_losses.front();
  r.last_loss = summary.train_losses.back();
  r.parameters = summary.model_parameters;
  r.model_flops_per_token = summary.model_flops_per_token;
  r.gpu_name = summary.gpu_name;
  r.peak_flops = options.peak_flops > 0 ? options.peak_flops : summary.peak_flops_per_gpu;
  r.memory = summary.memory;
  return r;
}

double model_flops_per_device(const BenchmarkResult& result) {
  return result.tokens_per_second_per_device * result.model_flops_per_token;
}

double model_flops_utilisation(const BenchmarkResult& result) {
  return model_flops_per_device(result) / result.peak_flops;
}

std::string to_json(const BenchmarkResult& r) {
  nlohmann::json j = {{"steps", r.steps},
                      {"step_ms", r.step_ms},
                      {"tokens_per_s", r.tokens_per_second},
                      {"tokens_per_s_per_device", r.tokens_per_second_per_device},
                      {"exposed_comm_ms", r.exposed_comm_ms},
                      {"parameters", r.parameters},
                      {"model_flops_per_token", r.model_flops_per_token},
                      {"first_loss", r.first_loss},
                      {"last_loss", r.last_loss},
                      {"world_size", r.world_size},
                      {"dp", r.data_parallel_size},
                      {"tp", r.tensor_parallel_size},
                      {"pp", r.pipeline_parallel_size},
                      {"peak_allocated_bytes_max", r.memory.allocated_peak.max},
                      {"peak_allocated_bytes_min", r.memory.allocated_peak.min}};
  if (r.memory.gpu) {
    j["peak_device_in_use_bytes_max"] = r.memory.device_in_use_peak.max;
    j["gpu_name"] = r.gpu_name;
    j["model_tflops_per_device"] = model_flops_per_device(r) / 1e12;
    if (r.peak_flops > 0) {
      j["peak_flops"] = r.peak_flops;
      j["mfu"] = model_flops_utilisation(r);
    }
  }
  return j.dump();
}

std::string describe(const BenchmarkResult& r) {
  std::string text = fmt::format(
      "bench: {} ranks (dp {} x tp {} x pp {}), {:.2f}M parameters: {:.0f} tokens/s ({:.0f} per device), step {:.1f} "
      "ms, "
      "exposed comm {:.1f} ms/step (medians of {} steps after the warm-up); loss {:.4f} -> {:.4f}\n"
      "peak memory per rank: {}",
      r.world_size, r.data_parallel_size, r.tensor_parallel_size, r.pipeline_parallel_size,
      static_cast<double>(r.parameters) / 1e6, r.tokens_per_second, r.tokens_per_second_per_device, r.step_ms,
      r.exposed_comm_ms, r.steps, r.first_loss, r.last_loss, format_memory(r.memory));
  if (r.memory.gpu) {
    text += fmt::format("\nmodel FLOPs {:.0f} TFLOP/s per GPU (6 N + 12 layers seq hidden a token), {}",
                        model_flops_per_device(r) / 1e12,
                        r.peak_flops > 0
                            ? fmt::format("MFU {:.1f}% of {:.0f} TFLOP/s ({})", 100.0 * model_flops_utilisation(r),
                                          r.peak_flops / 1e12, r.gpu_name)
                            : fmt::format("no MFU: no datasheet peak is known for {}; give --peak-tflops", r.gpu_name));
  }
  return text;
}

}  // namespace adamant::train
