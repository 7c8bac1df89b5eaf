#include "adamant/train/plan_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace adamant::train {

namespace {

constexpr double MiB = 1024.0 * 1024.0;
constexpr double GiB = 1024.0 * MiB;
constexpr std::size_t kClosestShown = 5;  // layouts listed when none fits

std::string volume_text(double bytes) { return bytes == 0 ? "-" : memory_text(bytes); }

std::string plan_row(const LayoutPlan& p, double fastest_seconds) {
  const ParallelLayout& l = p.layout;
  const RankMemory& m = p.memory;
  const StepCommunication& c = p.communication;
  return fmt::format(
      "{:>3} {:>3} {:>2} {:>5} {:>5} | {:>10} = {:>9} + {:>9} + {:>9} + {:>9} + {:>9} (stage {}, {} in flight) | "
      "{:>5.1f}% | {:>9} {:>9} {:>9} | {:>9.4g} s {:>5.2f}\n",
      l.tp, l.pp, l.virtual_pp, l.dp, l.micro_batches, memory_text(m.total()), memory_text(m.weights),
      memory_text(m.grads), memory_text(m.optimizer_state), memory_text(m.activations), memory_text(m.workspaces),
      m.stage, m.passes_in_flight, 100.0 * p.bubble, volume_text(c.dp_grad_sync + c.dp_param_sync),
      volume_text(c.tp_per_step), volume_text(c.pp_per_step), p.step_seconds, p.step_seconds / fastest_seconds);
}

std::string header() {
  return " tp  pp  v    dp     m | memory/rank =   weights +     grads + optimizer + activ'ns + workspace "
         "(busiest rank) | bubble |   dp comm   tp comm   pp comm | est. step  rel.\n";
}

// The keys that would shrink what a rank holds, of those not already at their smallest.
std::string fixes(const TrainConfig& config) {
  std::vector<std::string> keys;
  if (config.data.micro_batch_size > 1) keys.push_back("lower model.micro_batch_size (activations)");
  keys.push_back("use more GPUs (--gpus)");
  if (config.optim.name != "distributed_fused_adam") {
    keys.push_back(
        "set model.optim.name=distributed_fused_adam (optimizer state sharded over the data-parallel ranks)");
  } else if (!config.optim.store_param_remainders && weight_dtype_of(config) == DType::bf16) {
    keys.push_back("set model.optim.store_param_remainders=true (2 bytes less per weight shard)");
  }
  if (!config.model.recompute_activation) keys.push_back("set model.activations_checkpoint_granularity=selective");
  keys.push_back("or shrink model.num_layers, model.hidden_size or model.encoder_seq_length");
  std::string text;
  for (std::size_t i = 0; i < keys.size(); ++i) text += (i == 0 ? "" : "; ") + keys[i];
  return text;
}

}  // namespace

std::string memory_text(double bytes) {
  if (bytes < GiB) return fmt::format("{:.1f} MiB", bytes / MiB);
  return fmt::format("{:.1f} GiB", bytes / GiB);
}

PlanReport plan_report(const TrainConfig& config, const PlanRequest& request, const std::vector<LayoutPlan>& plans) {
  const model::GptConfig& m = config.model;
  PlanReport report;
  report.text = fmt::format(
      "{} on {} {} of {} each: GPT {} layers, hidden {}, {} heads, seq {}; global batch {}, micro-batch {}; {} "
      "weights, {}\n",
      request.config_name, request.gpus, request.gpu ? "GPUs" : "CPU ranks", memory_text(request.memory_per_rank),
      m.num_layers, m.hidden_size, m.num_attention_heads, m.seq_length, config.data.global_batch_size,
      config.data.micro_batch_size, dtype_name(weight_dtype_of(config)), config.optim.name);
  std::vector<const LayoutPlan*> fitting;
  for (const LayoutPlan& p : plans) {
    if (p.fits) fitting.push_back(&p);
  }
  report.fitting = static_cast<int>(fitting.size());
  report.text += fmt::format(
      "{} valid layout(s), {} fit. Memory: the busiest rank's; communication: bytes one rank sends per step; "
      "est. step: the cost model of docs/pipeline.md, rel.: against the fastest that fits\n",
      plans.size(), fitting.size());
  if (!fitting.empty()) {
    report.text += header();
    for (const LayoutPlan* p : fitting) {
      report.text += plan_row(*p, fitting.front()->step_seconds);
      report.text += "    " + layout_overrides(config, p->layout, request.gpus, request.gpu) + "\n";
    }
    return report;
  }
  if (plans.empty()) {
    report.text += fmt::format(
        "No layout of {} ranks can run this config: tensor parallelism must divide model.num_attention_heads ({}) "
        "and model.ffn_hidden_size ({}) and stay within a node of {}; model.num_layers ({}) must divide into the "
        "pipeline stages; model.global_batch_size ({}) must be a multiple of model.micro_batch_size ({}) x the "
        "data-parallel size with at least one micro-batch per stage. Change --gpus, model.global_batch_size or "
        "model.micro_batch_size.\n",
        request.gpus, m.num_attention_heads, m.ffn_hidden_size, kGpusPerNode, m.num_layers,
        config.data.global_batch_size, config.data.micro_batch_size);
    return report;
  }
  std::vector<const LayoutPlan*> closest;
  for (const LayoutPlan& p : plans) closest.push_back(&p);
  std::stable_sort(closest.begin(), closest.end(),
                   [](const LayoutPlan* a, const LayoutPlan* b) { return a->memory.total() < b->memory.total(); });
  closest.resize(std::min(closest.size(), kClosestShown));
  const LayoutPlan& least = *closest.front();
  report.text += fmt::format(
      "No layout fits {} per rank: the smallest needs {} (tp {}, pp {}, activations {}). To fit: {}. "
      "The closest layouts:\n",
      memory_text(request.memory_per_rank), memory_text(least.memory.total()), least.layout.tp, least.layout.pp,
      memory_text(least.memory.activations), fixes(config));
  report.text += header();
  for (const LayoutPlan* p : closest) report.text += plan_row(*p, closest.front()->step_seconds);
  return report;
}

}  // namespace adamant::train
