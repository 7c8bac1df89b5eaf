#pragma once
// The training loop: each step this stage's passes over the micro-batches (pipeline_runner.h;
// gradient accumulation), the optimizer step (fused_adam or distributed_fused_adam); validation
// and checkpoints at their intervals, resumption, and the run's reports (run_reporter.h). The
// same code runs on CPU and CUDA.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/train/memory_report.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

struct TrainSummary {
  std::int64_t steps_done = 0;        // optimizer steps at the end
  std::int64_t model_parameters = 0;  // of the whole model (all tensor-parallel slices)
  double model_flops_per_token = 0;   // 6 N + 12 layers seq hidden (model/param_layout.h), for MFU
  std::string gpu_name;               // GPU runs: this rank's GPU, as the driver names it
  double peak_flops_per_gpu = 0;      // its datasheet peak (train/gpu_peak.h); 0: not in the table
  std::vector<double> train_losses;   // one per step run in this call
  std::vector<std::pair<std::int64_t, double>> val_losses;  // (step, loss)
  double tokens_per_second = 0;                             // mean over the steps run, all ranks together
  std::vector<double> step_seconds;                         // wall time of each step run in this call
  std::vector<double> exposed_comm_ms;                      // this rank's, one per step run in this call
  double mean_exposed_comm_ms = 0;                          // over those steps after the first (RunMetrics)
  MemoryReport memory;                                      // peaks per rank over the run
  std::optional<std::filesystem::path> last_checkpoint;
  std::vector<kernels::MatmulAlgorithmRecord> matmul_algorithms;  // with TrainOptions::tune_matmul
};

struct TrainOptions {
  bool quiet = false;                           // no progress lines (tests)
  std::optional<std::int64_t> stop_after_step;  // stop early (as if interrupted) after this step
  MPI_Comm world = MPI_COMM_WORLD;              // the ranks of this run (tests use sub-communicators)
  // After the last step, time cuBLASLt's candidate algorithms for every GEMM the run made
  // (train/matmul_tuning.h); GPU runs.
  std::optional<kernels::MatmulTuningOptions> tune_matmul;
};

// Runs training as configured. Must be called on every MPI rank (MPI already initialised).
TrainSummary run_training(const TrainConfig& config, const TrainOptions& options = {});

}  // namespace adamant::train
