#pragma once
// Checks that a job's ranks sit on its hosts the way tensor and data parallelism need:
// tensor-parallel groups (adjacent ranks, Megatron's order) inside one host, where their
// per-layer collectives take the fast intra-host links, every host with the same number of
// ranks, and one GPU per rank.
#include <span>
#include <string>
#include <string_view>

namespace adamant::comm {

// Throws adamant::Error naming the group, the hosts and the fix when a tensor-parallel
// group of `tensor_parallel_size` adjacent ranks spans hosts or when hosts hold unequal
// numbers of ranks, unless `allow_irregular` (trainer.allow_irregular_node_layout).
// node_of_rank[r]: rank r's host index into node_names.
void check_node_placement(std::span<const int> node_of_rank, std::span<const std::string> node_names,
                          int tensor_parallel_size, bool allow_irregular);

// The GPU index for the rank `local_rank` of `local_size` on `host` when the process sees
// `visible_gpus` GPUs: its local rank when every rank has a GPU of its own, and 0 when the
// launcher gave each rank exactly one (srun --gpus-per-task=1, --gpu-bind). Throws when
// ranks would share a GPU.
int gpu_for_local_rank(int local_rank, int local_size, int visible_gpus, std::string_view host);

}  // namespace adamant::comm
