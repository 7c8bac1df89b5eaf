#pragma once
// Training checkpoints: <run>/checkpoints/step_<N>/ holds model.adm (rank 0: the
// whole model's weights per parameter, tensor-parallel slices joined and the later pipeline
// stages' parameters sent to it, the resolved config, the training position) and
// optim_rank_<r>.adm (each data-parallel rank's optimizer shard; with pipeline and tensor
// parallelism in pp_rank_<s>/tp_rank_<t>/, one folder per stage and tensor-parallel rank). Both
// load at any tensor-parallel, pipeline and data-parallel size. A checkpoint is
// assembled under a temporary name and renamed when every rank has written its
// part, so a crash mid-save never leaves a checkpoint that looks complete.
//
// Every checkpoint records the identity of the run that wrote it (run_id in model.adm's
// metadata); rotation (save_top_k) deletes only the writing run's own older checkpoints, and
// `latest` names the newest one. How a run picks the checkpoint it resumes from is in
// run_checkpoints.h.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/comm/process_grid.h"
#include "adamant/model/gpt_model.h"
#include "adamant/optim/optimizer.h"

namespace adamant::train {

struct TrainingPosition {
  std::int64_t step = 0;              // optimizer steps done
  std::int64_t consumed_samples = 0;  // global samples consumed by those steps
};

// A checkpoint folder's name: this prefix, then the step (zero-padded to 8 digits when written).
inline constexpr std::string_view kCheckpointFolderPrefix = "step_";
// A checkpoint being written lies in its folder's name plus this suffix until it is complete.
inline constexpr std::string_view kCheckpointPartialSuffix = ".partial";

// A fresh random run identity (16 hex digits).
std::string new_run_id();

// The complete checkpoints (step_<N> folders holding model.adm) in `dir`, oldest step first.
std::vector<std::filesystem::path> complete_checkpoints(const std::filesystem::path& dir);
// The run identity stored in a checkpoint; empty when it has none or its model.adm is unreadable.
std::string checkpoint_run_id(const std::filesystem::path& checkpoint);
// The checkpoint named by <dir>/latest, when that file exists (the folder may be missing).
std::optional<std::filesystem::path> latest_named(const std::filesystem::path& dir);

class CheckpointStore {
 public:
  // keep: how many of this run's newest checkpoints to keep (-1 keeps all); run_id: the run
  // writing them (new_run_id() for a fresh run, the resumed checkpoint's for a resumed one).
  // node_local: `dir` is on each host's own disk, and each host's first rank writes that host's
  // copy (checkpoint_roles.h).
  CheckpointStore(std::filesystem::path dir, int keep, std::string run_id = new_run_id(), bool node_local = false);

  const std::filesystem::path& dir() const { return dir_; }
  const std::string& run_id() const { return run_id_; }
  // The checkpoint `latest` names when it is complete, else the newest complete one, if any.
  std::optional<std::filesystem::path> latest() const;

  // Collective over the grid's world (every rank calls it). `config_yaml` is stored for generate/inspection.
  // Waits for the optimizer's parameter all-gathers first (overlap_param_sync leaves them running after a
  // step): the model file takes every weight, other ranks' shards too, from this rank's buffer.
  std::filesystem::path save(const TrainingPosition& position, model::GptModel& model, optim::Optimizer& optimizer,
                             const std::string& config_yaml, comm::ProcessGrid& grid) const;

 private:
  std::filesystem::path dir_;
  int keep_;
  std::string run_id_;
  bool node_local_;
};

// Reads every file of a checkpoint folder whose index modulo `parts` is `part` (sorted paths)
// and checks its checksums; returns what is wrong (naming the file), or nothing when intact.
std::optional<std::string> find_checkpoint_damage(const std::filesystem::path& checkpoint, int part, int parts);

// Loads weights (and, when given, optimizer state) from a checkpoint folder into a
// model built with the same architecture; a checkpoint of another model, another
// vocabulary or a damaged file throws adamant::Error naming the file and the fix.
TrainingPosition load_checkpoint(const std::filesystem::path& checkpoint, model::GptModel& model,
                                 optim::Optimizer* optimizer);

// A checkpoint of weights alone (step 0, no optimizer files) from the whole model's flat weights
// laid out as build_param_list(config) (tensor_parallel_size 1): what `adamant import` writes. It
// loads into `adamant generate`, `adamant export` and model.restore_from_path.
void write_weights_checkpoint(const std::filesystem::path& folder, const model::GptConfig& config, const void* weights,
                              DType weight_dtype, const std::string& config_yaml);

// The config stored in a checkpoint's model.adm (YAML text).
std::string checkpoint_config_yaml(const std::filesystem::path& checkpoint);

}  // namespace adamant::train
