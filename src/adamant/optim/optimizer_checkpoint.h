#pragma once
// The optimizer checkpoint format shared by FusedAdam and DistributedFusedAdam,
// and resharding on load.
//
// Each writing rank stores dir/optim_rank_<r>.adm (core/archive.h): tensors
// main_weights, exp_avg, exp_avg_sq (fp32, this rank's state, padding included)
// and in the meta: format_version, optimizer, step, loss_scaler, dp_size, rank,
// file_count, bucket_cap_mb, params [{name, shape, numel}] and pieces
// [[param, param_offset, state_offset, numel], ...]: which range of which
// parameter lies where in the state tensors. FusedAdam writes one file with one
// piece per parameter; DistributedFusedAdam one file per rank with its shards'
// fragments. Loading only needs the pieces, so any layout loads into any other.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "adamant/core/param_spec.h"

namespace adamant::optim {

inline constexpr int kOptimizerCheckpointVersion = 1;

// A range of one parameter inside a rank's optimizer state.
struct StatePiece {
  std::size_t param = 0;
  std::size_t param_offset = 0;
  std::size_t state_offset = 0;
  std::size_t numel = 0;
};

struct OptimizerCheckpointInfo {
  std::string optimizer;
  std::int64_t step = 0;
  nlohmann::json loss_scaler;
  int dp_size = 1;
  int rank = 0;
  int file_count = 1;  // how many optim_rank_<r>.adm files form the checkpoint
  double bucket_cap_mb = 0;
};

std::filesystem::path optimizer_shard_file(const std::filesystem::path& dir, int rank);

// Writes one rank's file (host memory; the three state arrays have equal size).
void write_optimizer_shard(const std::filesystem::path& dir, const ParamList& params,
                           const OptimizerCheckpointInfo& info, std::span<const StatePiece> pieces,
                           std::span<const float> main_weights, std::span<const float> exp_avg,
                           std::span<const float> exp_avg_sq);

// Fills this rank's state (host memory, the ranges named by `pieces`) from every file of the checkpoint in
// `dirs` (one folder per pipeline stage that wrote it; one without stages), whatever layout wrote it, reading
// one old file at a time. Parameters are matched by name, so a stage reads its layers from whichever folder
// holds them (a tied copy saved twice from the first). Validates the shapes and that every piece was covered.
// Returns the info of the checkpoint (step, loss scaler, ...).
OptimizerCheckpointInfo read_optimizer_state(std::span<const std::filesystem::path> dirs, const ParamList& params,
                                             std::span<const StatePiece> pieces, std::span<float> main_weights,
                                             std::span<float> exp_avg, std::span<float> exp_avg_sq);

}  // namespace adamant::optim
