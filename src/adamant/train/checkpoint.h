#pragma once
// Training checkpoints: <run>/checkpoints/step_<N>/ holds model.adm (rank 0: the
// whole model's weights per parameter, tensor-parallel slices joined, the resolved config,
// the training position) and optim_rank_<r>.adm (each data-parallel rank's optimizer shard;
// with tensor parallelism in tp_rank_<t>/, one folder per tensor-parallel rank). A checkpoint is
// assembled under a temporary name and renamed when every rank has written its
// part, so a crash mid-save never leaves a checkpoint that looks complete.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "adamant/comm/communicator.h"
#include "adamant/comm/process_grid.h"
#include "adamant/model/gpt_model.h"
#include "adamant/optim/optimizer.h"

namespace adamant::train {

struct TrainingPosition {
  std::int64_t step = 0;              // optimizer steps done
  std::int64_t consumed_samples = 0;  // global samples consumed by those steps
};

class CheckpointStore {
 public:
  // keep: how many of the newest checkpoints to keep (-1 keeps all). node_local: `dir` is on
  // each host's own disk, and each host's first rank writes that host's copy (checkpoint_roles.h).
  CheckpointStore(std::filesystem::path dir, int keep, bool node_local = false);

  const std::filesystem::path& dir() const { return dir_; }
  // The newest complete checkpoint, if any.
  std::optional<std::filesystem::path> latest() const;

  // Collective over the grid's world (every rank calls it). `config_yaml` is stored for generate/inspection.
  std::filesystem::path save(const TrainingPosition& position, model::GptModel& model,
                             const optim::Optimizer& optimizer, const std::string& config_yaml,
                             comm::ProcessGrid& grid) const;

 private:
  std::filesystem::path dir_;
  int keep_;
  bool node_local_;
};

// Loads weights (and, when given, optimizer state) from a checkpoint folder into a
// model built with the same architecture; a checkpoint of another model, another
// vocabulary or a damaged file throws adamant::Error naming the file and the fix.
TrainingPosition load_checkpoint(const std::filesystem::path& checkpoint, model::GptModel& model,
                                 optim::Optimizer* optimizer);

// The config stored in a checkpoint's model.adm (YAML text).
std::string checkpoint_config_yaml(const std::filesystem::path& checkpoint);

}  // namespace adamant::train
