#include "adamant/train/layout_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "adamant/core/error.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/model/param_layout.h"
#include "adamant/train/pipeline_schedule.h"

namespace adamant::train {

namespace {

// The micro-batches per data-parallel rank and step, or 0 when the global batch does not divide.
int micro_batches_per_rank(const TrainConfig& config, int dp) {
  const long long per_step = static_cast<long long>(config.data.micro_batch_size) * dp;
  if (config.data.global_batch_size % per_step != 0) return 0;
  return static_cast<int>(config.data.global_batch_size / per_step);
}

bool valid_pipeline(const TrainConfig& config, int pp, int virtual_pp, int micro_batches) {
  if (config.model.num_layers % (pp * virtual_pp) != 0) return false;
  if (micro_batches < pp) return false;
  return virtual_pp == 1 || micro_batches % pp == 0;
}

double ring_all_reduce(double bytes, int group) { return group > 1 ? 2.0 * (group - 1) / group * bytes : 0.0; }
double ring_share(double bytes, int group) { return group > 1 ? static_cast<double>(group - 1) / group * bytes : 0.0; }

StepCommunication step_communication(const TrainConfig& config, const model::GptConfig& gpt, const LayoutPlan& plan,
                                     Device device) {
  const ParallelLayout& l = plan.layout;
  const double activation_bytes =
      static_cast<double>(dtype_size(kernels::model_dtype(device, kernels::Role::activation, DType::f32)));
  const double micro_batch_rows = static_cast<double>(config.data.micro_batch_size) * gpt.seq_length;
  const double stream_bytes = micro_batch_rows * gpt.hidden_size * activation_bytes;  // [tokens, hidden]
  StepCommunication c;
  // dp: the model's flat buffers (padded) over the data-parallel group.
  const optim::OptimizerOptions o = optimizer_options_of(config);
  const double padded = plan.memory.grads / sizeof(float);
  if (o.name == "distributed_fused_adam") {
    c.dp_grad_sync = ring_share(padded * static_cast<double>(dtype_size(o.grad_sync_dtype)), l.dp);
    c.dp_param_sync = ring_share(plan.memory.weights, l.dp);
  } else {
    c.dp_grad_sync = ring_all_reduce(padded * sizeof(float), l.dp);
  }
  // tp: per layer, two row-parallel sums forward and two backward (all-reduces, or with sequence parallelism
  // all-gathers and reduce-scatters of the same total); the embedding's sum once per micro-batch.
  c.tp_per_layer = 4 * ring_all_reduce(stream_bytes, l.tp);
  const double layers_per_stage = static_cast<double>(gpt.num_layers) / l.pp;
  c.tp_per_step = l.micro_batches * (layers_per_stage * c.tp_per_layer + ring_all_reduce(stream_bytes, l.tp));
  // pp: each chunk boundary sends a micro-batch's output forward and its gradient backward (1/tp of the rows
  // with sequence parallelism); an inner stage sends both ways for each of its chunks.
  if (l.pp > 1) {
    const double boundary = gpt.sequence_parallel ? stream_bytes / l.tp : stream_bytes;
    c.pp_per_step = 2.0 * l.micro_batches * l.virtual_pp * boundary;
  }
  return c;
}

double step_seconds(const TrainConfig& config, const model::GptConfig& gpt, const LayoutPlan& plan, int gpus,
                    const CostModel& cost) {
  const ParallelLayout& l = plan.layout;
  const double tokens = static_cast<double>(config.data.global_batch_size) * gpt.seq_length;
  const double compute = step_flops(gpt.whole_model(), tokens) / (gpus * cost.flops_per_second);
  const bool one_node = gpus <= cost.gpus_per_node;
  const double between_ranks = one_node ? cost.intra_node_bytes_per_second : cost.inter_node_bytes_per_second;
  const StepCommunication& c = plan.communication;
  // Tensor parallelism stays inside a node and waits on every collective; pipeline sends wait too.
  const double tp = c.tp_per_step / cost.intra_node_bytes_per_second;
  const double pp = c.pp_per_step / between_ranks;
  // The gradient sync overlaps the last micro-batch's backward (two thirds of its compute); the parameter
  // all-gather overlaps the next forward only with model.optim.overlap_param_sync.
  const double last_backward = compute * (1 + plan.bubble) / l.micro_batches * 2.0 / 3.0;
  const double grad_sync = std::max(0.0, c.dp_grad_sync / between_ranks - last_backward);
  const double param_sync = config.optim.overlap_param_sync ? 0.0 : c.dp_param_sync / between_ranks;
  return compute * (1 + plan.bubble) + tp + pp + grad_sync + param_sync;
}

}  // namespace

double step_flops(const model::GptConfig& whole, double tokens) {
  const double h = whole.hidden_size, s = whole.seq_length, f = whole.ffn_hidden_size;
  // Per token: QKV, attention projection and MLP GEMMs (2 flops per weight), scores and their
  // weighted sum over s positions, the classifier.
  const double per_layer = 2 * (4 * h * h + 2 * h * f) + 4 * s * h;
  const double forward = tokens * (whole.num_layers * per_layer + 2 * h * whole.padded_vocab_size());
  return 3 * forward;
}

std::vector<ParallelLayout> valid_layouts(const TrainConfig& config, int gpus) {
  ADAMANT_CHECK(gpus >= 1, "--gpus {}: give the number of GPUs (or CPU ranks) to plan for, 1 or more", gpus);
  const model::GptConfig& m = config.model;
  std::vector<ParallelLayout> layouts;
  for (int tp = 1; tp <= std::min(gpus, kGpusPerNode); ++tp) {
    if (gpus % tp != 0 || m.num_attention_heads % tp != 0 || m.ffn_hidden_size % tp != 0) continue;
    for (int pp = 1; pp <= gpus / tp; ++pp) {
      if ((gpus / tp) % pp != 0) continue;
      const int dp = gpus / (tp * pp);
      const int micro_batches = micro_batches_per_rank(config, dp);
      if (micro_batches == 0) continue;
      std::vector<int> chunk_counts{1};
      if (pp > 1 && m.virtual_pipeline_size > 1) chunk_counts.push_back(m.virtual_pipeline_size);
      for (const int v : chunk_counts) {
        if (valid_pipeline(config, pp, v, micro_batches)) layouts.push_back({tp, pp, v, dp, micro_batches});
      }
    }
  }
  return layouts;
}

model::GptConfig layout_model(const TrainConfig& config, const ParallelLayout& layout, int vocab_size) {
  model::GptConfig gpt = config.model;
  gpt.vocab_size = vocab_size;
  gpt.tensor_parallel_size = layout.tp;
  gpt.sequence_parallel = layout.tp > 1 && config.model.sequence_parallel;
  gpt.pipeline_parallel_size = layout.pp;
  gpt.virtual_pipeline_size = layout.virtual_pp;
  gpt.validate();
  return gpt;
}

std::vector<LayoutPlan> plan_layouts(const TrainConfig& config, int vocab_size, int gpus, Device device,
                                     double memory_per_rank, const CostModel& cost) {
  std::vector<LayoutPlan> plans;
  for (const ParallelLayout& layout : valid_layouts(config, gpus)) {
    const model::GptConfig gpt = layout_model(config, layout, vocab_size);
    LayoutPlan plan;
    plan.layout = layout;
    plan.memory = busiest_rank_memory(config, gpt, layout.dp, layout.micro_batches, device);
    plan.bubble = pipeline_bubble_fraction({layout.pp, layout.virtual_pp, layout.micro_batches});
    plan.communication = step_communication(config, gpt, plan, device);
    plan.step_seconds = step_seconds(config, gpt, plan, gpus, cost);
    plan.fits = plan.memory.total() <= memory_per_rank;
    plans.push_back(plan);
  }
  std::stable_sort(plans.begin(), plans.end(),
                   [](const LayoutPlan& a, const LayoutPlan& b) { return a.step_seconds < b.step_seconds; });
  for (LayoutPlan& plan : plans) plan.relative_time = plan.step_seconds / plans.front().step_seconds;
  return plans;
}

std::string layout_overrides(const TrainConfig& config, const ParallelLayout& layout, int gpus, bool gpu) {
  std::string line = fmt::format(
      "model.tensor_model_parallel_size={} model.pipeline_model_parallel_size={} "
      "model.virtual_pipeline_model_parallel_size={}",
      layout.tp, layout.pp, layout.virtual_pp);
  if (layout.tp == 1 && config.model.sequence_parallel) line += " model.sequence_parallel=false";
  if (gpu) {
    // Whole nodes of kGpusPerNode, or as many equal nodes as that needs; -1: the ranks the launcher starts.
    const int nodes = (gpus + kGpusPerNode - 1) / kGpusPerNode;
    const int per_node = gpus % nodes == 0 ? gpus / nodes : -1;
    line += fmt::format(" trainer.devices={} trainer.num_nodes={}", per_node, nodes);
  } else {
    line += " trainer.accelerator=cpu";
  }
  return line;
}

}  // namespace adamant::train
