#pragma once
// The tensor x pipeline x data-parallel layouts of a config on N GPUs (or CPU ranks): which are
// valid, what each rank holds (rank_memory.h: the functions the run sizes its buffers with), the
// pipeline bubble, the communication of a step, and an estimated step time that ranks them
// (docs/pipeline.md, "Planning a layout").
#include <string>
#include <vector>

#include "adamant/core/device.h"
#include "adamant/model/gpt_config.h"
#include "adamant/train/rank_memory.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

struct ParallelLayout {
  int tp = 1;             // model.tensor_model_parallel_size
  int pp = 1;             // model.pipeline_model_parallel_size
  int virtual_pp = 1;     // model.virtual_pipeline_model_parallel_size
  int dp = 1;             // data-parallel ranks: gpus / (tp * pp)
  int micro_batches = 1;  // per data-parallel rank and step

  bool operator==(const ParallelLayout&) const = default;
};

// The layouts of tp * pp * dp == gpus that can run the config: tp divides the heads and the FFN width and is at
// most kGpusPerNode; the layers divide into pp * v chunks; the micro-batches per data-parallel rank
// (global_batch_size / (micro_batch_size * dp)) are a whole number, at least pp, and a multiple of pp when v > 1.
// v is 1 and, with pp > 1, the config's model.virtual_pipeline_model_parallel_size. Ordered by (tp, pp, v).
std::vector<ParallelLayout> valid_layouts(const TrainConfig& config, int gpus);

// The config's model at `layout` with `vocab_size` tokens (sequence parallelism as configured when tp > 1).
model::GptConfig layout_model(const TrainConfig& config, const ParallelLayout& layout, int vocab_size);

// Bytes one GPU sends per optimizer step (ring collectives: an all-reduce of n bytes over g ranks sends
// 2 (g - 1) / g n, a reduce-scatter or all-gather (g - 1) / g n).
struct StepCommunication {
  double dp_grad_sync = 0;   // the gradient reduce-scatter (distributed_fused_adam) or all-reduce (fused_adam)
  double dp_param_sync = 0;  // the parameter all-gather (distributed_fused_adam)
  double tp_per_layer = 0;   // one layer's tensor-parallel collectives for one micro-batch, forward and backward
  double tp_per_step = 0;    // every layer of the stage, every micro-batch, plus the embedding's
  double pp_per_step = 0;    // activations and their gradients sent to the neighbouring stages
};

struct LayoutPlan {
  ParallelLayout layout;
  RankMemory memory;  // the busiest rank
  double bubble = 0;  // (p - 1) / (m v)
  StepCommunication communication;
  double step_seconds = 0;   // the cost model's estimate
  double relative_time = 1;  // step_seconds over the fastest plan's
  bool fits = false;         // memory.total() <= the memory per rank
};

// The cost model's throughput figures (an H200 node: 8 GPUs joined by NVLink, one 400 Gb/s link per GPU between
// nodes).
struct CostModel {
  double flops_per_second = 400e12;            // sustained bf16 GEMM throughput per GPU
  double intra_node_bytes_per_second = 200e9;  // NVLink, per GPU and direction
  double inter_node_bytes_per_second = 40e9;   // InfiniBand, per GPU and direction
  int gpus_per_node = 8;
};

inline constexpr int kGpusPerNode = 8;

// Every valid layout, planned, fastest first.
std::vector<LayoutPlan> plan_layouts(const TrainConfig& config, int vocab_size, int gpus, Device device,
                                     double memory_per_rank, const CostModel& cost = {});

// The floating-point operations of one optimizer step of the whole model (forward and backward: 3x the forward's).
double step_flops(const model::GptConfig& whole, double tokens);

// NeMo-style overrides selecting the layout on `gpus` ranks (trainer.devices and trainer.num_nodes for GPUs).
std::string layout_overrides(const TrainConfig& config, const ParallelLayout& layout, int gpus, bool gpu);

}  // namespace adamant::train
