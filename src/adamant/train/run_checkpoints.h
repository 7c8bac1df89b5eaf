#pragma once
// Where a run starts, decided once before training (collective over the world):
//  - leftovers of an interrupted save (step_N.partial/ folders, *.tmp.<pid> files) are removed;
//  - exp_manager.resume_from_checkpoint names a checkpoint to continue from (it must be intact);
//  - else with exp_manager.resume_if_exists the run follows <run>/checkpoints/latest, checks the
//    checkpoint's files and, when it is missing or damaged, falls back to the newest intact
//    checkpoint with a warning;
//  - a fresh run refuses to start over checkpoints another run left in the folder, unless
//    exp_manager.overwrite_existing_run is true (then it deletes them first).
// See docs/reliability.md.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

struct RunStart {
  std::optional<std::filesystem::path> checkpoint;  // to resume from; none for a fresh run
  std::string run_id;                               // the identity the run's checkpoints carry
  std::vector<std::string> warnings;                // for rank 0 to print (fallbacks, deletions)
};

// Every rank calls it; every rank gets the same answer or the same adamant::Error.
RunStart prepare_run_start(const TrainConfig& config, comm::Communicator& world);

// Removes step_*.partial/ folders and *.tmp.<digits> files left by an interrupted save in
// `folder` (not recursive). Returns the removed paths.
std::vector<std::filesystem::path> remove_interrupted_saves(const std::filesystem::path& folder);

}  // namespace adamant::train
