#pragma once
// The bytes one rank of a training run holds, computed from the config with the functions the run
// sizes its buffers with: the stage's parameter list (build_stage_param_list), the optimizer's bucket
// plan and shard ranges (padding, state, segment tables, bf16 staging), the model's buffers
// (model_memory: activations planned by ActivationLayout for the schedule's peak passes in flight).
// Nothing is allocated, so any layout can be sized, including ones far beyond this machine.
#include "adamant/core/device.h"
#include "adamant/model/gpt_config.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

// Bytes on the run's compute device (the GPU, or the host for a CPU run) unless said otherwise.
struct RankMemory {
  int stage = 0;               // the pipeline stage of this rank
  int passes_in_flight = 1;    // micro-batches' activations it holds at once (peak_passes_in_flight)
  double parameters = 0;       // its parameters (the stage's list on one tensor-parallel rank)
  double weights = 0;          // model weights, shard padding included
  double grads = 0;            // the flat gradient buffer
  double optimizer_state = 0;  // main weights (or remainders), exp_avg, exp_avg_sq: this rank's shard
  double activations = 0;      // saved activations of every pass in flight plus the shared scratch
  // Everything else: the fp32 working copy of 16-bit weights (CPU), the per-micro-batch gradient scratch,
  // token ids, the optimizer's segment tables and bf16 gradient staging, the GEMM workspace and the
  // attention backward's score scratch (GPU), and on a CPU run the host statistics row.
  double workspaces = 0;
  double host = 0;  // host memory the run holds besides (a GPU run's statistics row)

  double total() const { return weights + grads + optimizer_state + activations + workspaces; }
};

// Stage `stage` of a run of `config` whose model is `gpt` (validated, with the vocabulary; its
// tensor_parallel_size, pipeline_parallel_size and virtual_pipeline_size say the layout), `dp`
// data-parallel ranks and `micro_batches` micro-batches per data-parallel rank and step, on `device`.
RankMemory stage_memory(const TrainConfig& config, const model::GptConfig& gpt, int dp, int micro_batches, int stage,
                        Device device);

// The stage that holds the most (stage 0 holds the most activations, the last one the classifier and
// the tied embedding copy: every stage is sized and the largest total kept).
RankMemory busiest_rank_memory(const TrainConfig& config, const model::GptConfig& gpt, int dp, int micro_batches,
                               Device device);

}  // namespace adamant::train
