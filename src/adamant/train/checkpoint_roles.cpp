#include "adamant/train/checkpoint_roles.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "adamant/core/error.h"
#include "adamant/core/number_text.h"

namespace adamant::train {

CheckpointRoles checkpoint_roles(const comm::ProcessGrid& grid, bool node_local) {
  const int rank = grid.world_rank();
  const int tp = grid.tp_size();
  if (!node_local) {
    const bool first = rank == 0;
    return {first, grid.dp_rank() == 0, first};
  }
  ADAMANT_CHECK(grid.pp_size() == 1,
                "exp_manager.checkpoint_callback_params.node_local is true with model.pipeline_model_parallel_size={}: "
                "each host would need every stage's layers to write a whole checkpoint; write checkpoints to shared "
                "storage (node_local=false) with pipeline stages",
                grid.pp_size());
  const std::vector<int>& node_of_rank = grid.topology().node_of_rank();
  // Each host's first rank must lead a tensor-parallel group that lies on the host.
  for (std::size_t r = 0; r < node_of_rank.size(); ++r) {
    const bool host_starts = r == 0 || node_of_rank[r] != node_of_rank[r - 1];
    const bool group_starts = r % static_cast<std::size_t>(tp) == 0;
    const bool group_ends_on_host = r + static_cast<std::size_t>(tp) - 1 < node_of_rank.size() &&
                                    node_of_rank[r + static_cast<std::size_t>(tp) - 1] == node_of_rank[r];
    ADAMANT_CHECK(!host_starts || (group_starts && group_ends_on_host),
                  "exp_manager.checkpoint_callback_params.node_local needs each host's ranks to start a "
                  "tensor-parallel group that stays on the host (rank {} on host {} does not); place the ranks "
                  "in blocks per host without trainer.allow_irregular_node_layout, or write checkpoints to "
                  "shared storage",
                  r, grid.topology().node_names()[static_cast<std::size_t>(node_of_rank[r])]);
  }
  const std::size_t group_first = static_cast<std::size_t>(rank - grid.tp_rank());
  const bool leads_host =
      rank == 0 || node_of_rank[static_cast<std::size_t>(rank)] != node_of_rank[static_cast<std::size_t>(rank) - 1];
  const bool group_leads_host = group_first == 0 || node_of_rank[group_first] != node_of_rank[group_first - 1];
  return {leads_host, group_leads_host, leads_host};
}

std::optional<std::filesystem::path> agreed_latest_checkpoint(const CheckpointStore& store, comm::Communicator& world) {
  const auto latest = store.latest();
  // The folder's name orders checkpoints by step; -1: none. Max of (step, -step) gives both extremes.
  std::int64_t step = -1;
  if (latest) {
    const std::string name = latest->filename().string();  // is_complete_checkpoint saw the prefix
    const std::optional<std::int64_t> number =
        number_from_text<std::int64_t>(std::string_view(name).substr(kCheckpointFolderPrefix.size()));
    ADAMANT_CHECK(number && *number >= 0,
                  "checkpoint folder {} is not named step_<step> as Adamant writes them; rename it (e.g. "
                  "step_00000100) or move it out of {}",
                  latest->string(), store.dir().string());
    step = *number;
  }
  std::array<std::int64_t, 2> extremes = {step, -step};
  world.all_reduce(Tensor::flat(extremes.data(), DType::i64, Device::cpu(), extremes.size()), comm::ReduceOp::max);
  const std::int64_t newest = extremes[0], oldest = -extremes[1];
  ADAMANT_CHECK(newest == oldest,
                "ranks disagree on the newest checkpoint in {}: step {} on some, {} on others (-1: none). A save "
                "to node-local disks (exp_manager.checkpoint_callback_params.node_local) was cut off before "
                "every host finished it; delete the step_{:08} folders where they exist and resume again",
                store.dir().string(), newest, oldest, newest);
  return latest;
}

}  // namespace adamant::train
