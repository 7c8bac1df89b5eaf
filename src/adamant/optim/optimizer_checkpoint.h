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
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
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

// One folder of a checkpoint's optimizer files: those of one pipeline stage and one tensor-parallel
// rank (split_rank) of the run that saved it.
struct SavedStateFolder {
  std::filesystem::path dir;
  int stage = 0;
  int split_rank = 0;
};

// Where element `element` of saved tensor-parallel rank `split_rank`'s slice of this rank's parameter
// `param` lies in this rank's slice of it; nullopt when another rank holds it, or when it is read from
// another saved rank (a replicated parameter, from rank 0 only).
using SplitRemap = std::function<std::optional<std::size_t>(std::size_t param, int split_rank, std::size_t element)>;

// What load() reads: the folders of every stage (and tensor-parallel rank) that saved, and, when the
// checkpoint was written at another tensor-parallel size, how the saved slices map onto this rank's.
struct SavedState {
  std::vector<SavedStateFolder> folders;
  SplitRemap remap;  // empty: the files hold this rank's own slices

  static SavedState single_folder(const std::filesystem::path& dir) { return {{{dir, 0, 0}}, {}}; }
};

// Fills this rank's state (host memory, the ranges named by `pieces`) from every file of the saved
// folders, whatever layout wrote them, reading one old file at a time. Parameters are matched by name, so
// a stage reads its layers from whichever stage's folder holds them (a tied copy saved twice from the
// first). Validates the shapes (unless remapped) and that every element was covered exactly once.
// Returns the info of the checkpoint (step, loss scaler, ...).
OptimizerCheckpointInfo read_optimizer_state(const SavedState& saved, const ParamList& params,
                                             std::span<const StatePiece> pieces, std::span<float> main_weights,
                                             std::span<float> exp_avg, std::span<float> exp_avg_sq);

}  // namespace adamant::optim
