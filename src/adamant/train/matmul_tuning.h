#pragma once
// `adamant tune-matmul`: one training step of a config on one GPU, then each GEMM it made
// timed with cuBLASLt's candidate algorithms (kernels/matmul_algorithms.h) and the fastest
// recorded in a table that later runs read through trainer.matmul_algorithms.
#include <mpi.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

struct MatmulTuningReport {
  std::vector<kernels::MatmulAlgorithmRecord> records;  // this run's, one per GEMM shape
  std::filesystem::path output;
  std::size_t choices_in_file = 0;  // after merging with what the file held
};

// Runs one step of `config` (as a benchmark: no validation, checkpoints or resume; the run
// folder under `run_root`) on the one rank of `world`, times the candidates and merges the
// choices into `output` (replacing those of the same GPU, cuBLASLt version and shape),
// written under a temporary name and renamed. A malformed `output` is refused, not replaced.
MatmulTuningReport tune_matmul(const TrainConfig& config, const kernels::MatmulTuningOptions& options,
                               const std::filesystem::path& output, const std::filesystem::path& run_root,
                               MPI_Comm world);

// A line per GEMM shape (its times and configuration) and the totals.
std::string describe(const MatmulTuningReport& report);

}  // namespace adamant::train
