#pragma once
// Training throughput of a config on this machine (`adamant bench`): a short run with
// no validation, no checkpoints and nothing resumed, timed step by step; the figures
// are medians over the steps after the warm-up ones, so start-up, the first cuBLASLt
// plans and the first collectives do not count.
#include <cstdint>
#include <string>

#include "adamant/train/memory_report.h"
#include "adamant/train/train_config.h"
#include "adamant/train/trainer.h"

namespace adamant::train {

struct BenchmarkOptions {
  int warmup_steps = 2;
  int steps = 10;         // timed, after the warm-up
  double peak_flops = 0;  // per GPU, for the MFU; 0: the GPU's datasheet figure (train/gpu_peak.h)
};

struct BenchmarkResult {
  int steps = 0;                 // timed
  double step_ms = 0;            // median
  double tokens_per_second = 0;  // all ranks together, from the median step
  double tokens_per_second_per_device = 0;
  double model_flops_per_token = 0;  // 6 N + 12 layers seq hidden (N: the whole model's parameters)
  double exposed_comm_ms = 0;        // median per step, rank 0 (docs/distributed_fused_adam.md)
  double first_loss = 0, last_loss = 0;
  int world_size = 0, data_parallel_size = 0, tensor_parallel_size = 0, pipeline_parallel_size = 0;
  std::int64_t parameters = 0;  // the whole model's
  std::string gpu_name;         // GPU runs: rank 0's GPU
  double peak_flops = 0;        // per GPU: as given, else the datasheet's; 0: none known (no MFU)
  MemoryReport memory;
};

// `config` as given, with the run's length, validation, checkpoints and resumption
// overridden for a benchmark and the run folder under `run_root`.
TrainConfig benchmark_config(TrainConfig config, const BenchmarkOptions& options,
                             const std::filesystem::path& run_root);

// Runs the benchmark (collective over options.world). The result is the same on every rank.
BenchmarkResult run_benchmark(const TrainConfig& config, const BenchmarkOptions& options,
                              const TrainOptions& train_options);

// The model's FLOP/s per device: tokens/s per device x FLOPs per token.
double model_flops_per_device(const BenchmarkResult& result);
// Model FLOPs utilisation: model_flops_per_device over the peak (GPU runs with a peak known).
double model_flops_utilisation(const BenchmarkResult& result);

std::string to_json(const BenchmarkResult& result);
std::string describe(const BenchmarkResult& result);

}  // namespace adamant::train
