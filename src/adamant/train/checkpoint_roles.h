#pragma once
// Which rank writes which part of a checkpoint, so that each part is written once per
// filesystem. Shared storage (every host sees exp_manager.exp_dir): world rank 0 prepares
// and finishes the folder and writes the model, which the tensor-parallel group of
// data-parallel rank 0 gathers for it. Node-local storage
// (exp_manager.checkpoint_callback_params.node_local): the first rank of each host does so on
// its host's disk, so that every host holds a complete checkpoint of its own ranks. Every rank
// writes its own optimizer shard in both.
#include <filesystem>
#include <optional>

#include "adamant/comm/process_grid.h"
#include "adamant/train/checkpoint.h"

namespace adamant::train {

struct CheckpointRoles {
  bool prepares_folder = false;  // creates <step>.partial/, renames it when every rank is done, rotates
  bool gathers_model = false;    // joins the all-gather of the model's tensor-parallel slices
  bool writes_model = false;     // writes model.adm
};

// Throws adamant::Error, alike on every rank, when node-local checkpoints meet a tensor-parallel
// group that spans hosts (trainer.allow_irregular_node_layout).
CheckpointRoles checkpoint_roles(const comm::ProcessGrid& grid, bool node_local);

// store.latest(), checked to be the same step on every rank (collective over `world`): with
// node-local disks a save interrupted between two hosts' renames leaves the hosts disagreeing,
// and each resuming from its own newest would mix two steps. Throws adamant::Error on every
// rank then, naming both steps and the fix.
std::optional<std::filesystem::path> agreed_latest_checkpoint(const CheckpointStore& store, comm::Communicator& world);

}  // namespace adamant::train
