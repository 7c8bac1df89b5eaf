#pragma once
// What a run reports: one JSON object per line in <run>/metrics.jsonl and a
// progress line on stdout (rank 0 only).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "adamant/core/file_write.h"
#include "adamant/train/memory_report.h"

namespace adamant::train {

struct StepMetrics {
  std::int64_t step = 0;
  std::int64_t max_steps = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double loss_scale = 1;
  bool skipped = false;
  double tokens_per_second = 0;
  double step_seconds = 0;
  std::int64_t consumed_samples = 0;
  double exposed_comm_ms = 0;  // rank 0's compute stream idle in waits on communication (Optimizer)
  // GPU runs: tokens/s per GPU x the model's FLOPs per token (6 N + 12 layers seq hidden), and the
  // GPU's datasheet peak (train/gpu_peak.h; 0 where the GPU is not in the table). 0 on the CPU.
  double model_flops_per_gpu = 0;
  double peak_flops_per_gpu = 0;

  // The model FLOPs utilisation: a GPU run's, where its GPU's peak is known.
  std::optional<double> mfu() const {
    if (model_flops_per_gpu > 0 && peak_flops_per_gpu > 0) return model_flops_per_gpu / peak_flops_per_gpu;
    return std::nullopt;
  }
};

// The last record of a run, for benchmarks and tools (which read it instead of the progress lines).
struct RunMetrics {
  std::int64_t steps = 0;           // steps run in this call
  double tokens_per_second = 0;     // mean over those steps, all ranks together
  double mean_exposed_comm_ms = 0;  // rank 0's, mean over the steps after the first (the first alone if only one)
  int world_size = 1;
  int data_parallel_size = 1;
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  MemoryReport memory;
  double model_flops_per_token = 0;  // model/param_layout.h: for MFU against a GPU's peak
  std::string gpu_name;              // GPU runs: the driver's product name (rank 0's GPU)
  double peak_flops_per_gpu = 0;     // its datasheet peak (train/gpu_peak.h); 0: not in the table
};

class MetricsLog {
 public:
  // A run from step 0 (resumed_at_step empty) starts the file afresh. A run resumed at step S
  // continues it: records of steps after S (written by the interrupted run, about to be run
  // again) and a torn last line are removed, and a "resume" record says how many, so no
  // step appears twice. Every write is checked (a full disk is an error naming the file).
  MetricsLog(const std::filesystem::path& file, std::optional<std::int64_t> resumed_at_step);
  void step(const StepMetrics& m);
  void validation(std::int64_t step, double val_loss);
  void run_summary(const RunMetrics& m);
  void event(const std::string& name, std::int64_t step, const std::string& detail);

 private:
  void write(const std::string& line);
  std::int64_t removed_records_ = 0;  // by a resume, before out_ opens the file
  AppendFile out_;
};

// Formats the progress line: step, loss, lr, grad norm, tokens/s, exposed communication, ETA.
std::string format_progress(const StepMetrics& m, double eta_seconds);
std::string format_duration(double seconds);

}  // namespace adamant::train
