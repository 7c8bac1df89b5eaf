#include "adamant/comm/placement.h"

#include <fmt/format.h>

#include <vector>

#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

constexpr const char* kAllowKey = "trainer.allow_irregular_node_layout=true";

std::string describe_ranks_per_node(const std::vector<int>& ranks_per_node, std::span<const std::string> names) {
  std::string text;
  for (std::size_t n = 0; n < ranks_per_node.size(); ++n) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} has {}", names[n], ranks_per_node[n]);
  }
  return text;
}

}  // namespace

void check_node_placement(std::span<const int> node_of_rank, std::span<const std::string> node_names,
                          int tensor_parallel_size, bool allow_irregular) {
  if (allow_irregular) return;
  std::vector<int> ranks_per_node(node_names.size(), 0);
  for (const int node : node_of_rank) ranks_per_node[static_cast<std::size_t>(node)] += 1;
  for (const int count : ranks_per_node) {
    ADAMANT_CHECK(count == ranks_per_node.front(),
                  "the hosts run unequal numbers of ranks ({}); launch the same number on every host (srun "
                  "--ntasks-per-node, mpirun --map-by ppr:<n>:node) or set {}",
                  describe_ranks_per_node(ranks_per_node, node_names), kAllowKey);
  }
  const std::size_t tp = static_cast<std::size_t>(tensor_parallel_size);
  for (std::size_t first = 0; first + tp <= node_of_rank.size(); first += tp) {
    for (std::size_t r = first + 1; r < first + tp; ++r) {
      if (node_of_rank[r] == node_of_rank[first]) continue;
      fail(
          "tensor-parallel group of ranks {}..{} (model.tensor_model_parallel_size={}) spans hosts {} and {}; "
          "its collectives in every layer would cross the network. Choose a tensor-parallel size that divides "
          "the {} ranks per host, launch ranks in blocks per host (srun --distribution=block, mpirun --map-by "
          "ppr:<n>:node), or set {}",
          first, first + tp - 1, tensor_parallel_size, node_names[static_cast<std::size_t>(node_of_rank[first])],
          node_names[static_cast<std::size_t>(node_of_rank[r])], ranks_per_node.front(), kAllowKey);
    }
  }
}

int gpu_for_local_rank(int local_rank, int local_size, int visible_gpus, std::string_view host) {
  ADAMANT_CHECK(visible_gpus > 0,
                "host {} shows this rank no GPU; check CUDA_VISIBLE_DEVICES and the job's GPU "
                "request (srun --gpus-per-node, --gres=gpu:<n>)",
                host);
  if (visible_gpus == 1) return 0;  // the launcher bound this rank to one GPU
  ADAMANT_CHECK(local_size <= visible_gpus,
                "host {} runs {} ranks but shows them {} GPUs; launch one rank per GPU (srun "
                "--ntasks-per-node={}, mpirun --map-by ppr:{}:node) or give each rank one GPU "
                "(srun --gpus-per-task=1)",
                host, local_size, visible_gpus, visible_gpus, visible_gpus);
  return local_rank;
}

}  // namespace adamant::comm
