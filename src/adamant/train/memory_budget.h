#pragma once
// What a run will need, estimated from the config before anything is allocated, so that an
// absurd size (model.num_layers=1000000) is refused at once with the numbers and the keys to
// change, instead of ending in std::bad_alloc after minutes of set-up.
#include <cstddef>
#include <string>

#include "adamant/core/device.h"
#include "adamant/model/gpt_config.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

// For the busiest pipeline stage of the run (rank_memory.h): a run with pipeline stages is sized by
// what one stage holds, not the whole model.
struct MemoryEstimate {
  double parameters = 0;   // on one tensor-parallel rank of the busiest stage
  double model_state = 0;  // weights + gradients + optimizer state by the formula per weight (padding aside)
  double activations = 0;  // every pass in flight's saved activations plus the scratch, bytes per rank
  double bookkeeping = 0;  // host: per-tensor tables (parameter list, bucket fragments)
  // Every buffer on the GPU, or on the host for a CPU run (rank_memory.h's total, padding and workspaces included).
  double on_compute_device = 0;
  double on_host = 0;  // what the host holds in any case (+ the compute device's share on CPU)
};

// gpt: the model as one tensor-parallel rank builds it (its pipeline sizes say the stages); dp:
// data-parallel ranks. Exact (the buffers the run allocates) up to thousands of layers per stage, the
// closed form beyond.
MemoryEstimate estimate_memory(const TrainConfig& config, const model::GptConfig& gpt, int dp, bool on_gpu);

// The parameter count of one tensor-parallel rank, in closed form (no parameter list is built).
double parameters_per_rank(const model::GptConfig& gpt);

// Throws adamant::Error when the estimate exceeds what the machine has: host_bytes_per_rank (the
// node's memory over its ranks) and, for a GPU run, device_bytes (the GPU's memory).
void check_memory_budget(const TrainConfig& config, const MemoryEstimate& estimate, double host_bytes_per_rank,
                         double device_bytes, bool on_gpu);

// The node's physical memory in bytes.
double host_memory_bytes();

}  // namespace adamant::train
