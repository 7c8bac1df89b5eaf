#include "adamant/train/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "adamant/core/error.h"

namespace adamant::train {

namespace {

// The k-th forward (or backward) pass of a stage in the interleaved order: micro-batches in
// groups of p, each group through every chunk in turn (backwards through them in reverse).
PipelineStep nth_pass(const PipelineLayout& layout, int k, PipelinePass pass) {
  const int p = layout.stages, v = layout.virtual_stages;
  const int in_group = k % (p * v);
  int chunk = in_group / p;
  if (pass == PipelinePass::backward) chunk = v - 1 - chunk;
  return {pass, k / (p * v) * p + k % p, chunk};
}

}  // namespace

void check_pipeline_layout(const PipelineLayout& layout) {
  ADAMANT_CHECK(layout.stages >= 1, "model.pipeline_model_parallel_size = {} must be at least 1", layout.stages);
  ADAMANT_CHECK(layout.virtual_stages >= 1,
                "model.virtual_pipeline_model_parallel_size = {} must be at least 1 (or null: no interleaving)",
                layout.virtual_stages);
  ADAMANT_CHECK(layout.micro_batches >= 1,
                "{} micro-batches per step; model.global_batch_size must be at least "
                "model.micro_batch_size x the data-parallel size",
                layout.micro_batches);
  ADAMANT_CHECK(layout.stages == 1 || layout.micro_batches >= layout.stages,
                "{} micro-batches per step (model.global_batch_size / (model.micro_batch_size x data-parallel size)) "
                "for model.pipeline_model_parallel_size = {}: the 1F1B schedule needs at least one micro-batch per "
                "stage; raise model.global_batch_size or lower model.micro_batch_size",
                layout.micro_batches, layout.stages);
  ADAMANT_CHECK(layout.virtual_stages == 1 || layout.micro_batches % layout.stages == 0,
                "{} micro-batches per step with model.virtual_pipeline_model_parallel_size = {}: the interleaved "
                "schedule takes micro-batches in groups of model.pipeline_model_parallel_size = {}; make "
                "model.global_batch_size / (model.micro_batch_size x data-parallel size) a multiple of {}",
                layout.micro_batches, layout.virtual_stages, layout.stages, layout.stages);
}

std::vector<PipelineStep> pipeline_schedule(const PipelineLayout& layout, int stage) {
  check_pipeline_layout(layout);
  ADAMANT_CHECK(stage >= 0 && stage < layout.stages, "pipeline stage {} of {}", stage, layout.stages);
  const int p = layout.stages, v = layout.virtual_stages, total = layout.micro_batches * v;
  // Forwards before the first backward: enough to fill the pipeline behind this stage.
  int warmup = v == 1 ? p - stage - 1 : (p - stage - 1) * 2 + (v - 1) * p;
  if (v > 1 && layout.micro_batches == p) warmup = total;  // every forward first, as Megatron does
  warmup = std::min(warmup, total);
  std::vector<PipelineStep> steps;
  steps.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) steps.push_back(nth_pass(layout, k, PipelinePass::forward));
  const int steady = total - warmup;
  for (int k = 0; k < steady; ++k) {
    steps.push_back(nth_pass(layout, warmup + k, PipelinePass::forward));
    steps.push_back(nth_pass(layout, k, PipelinePass::backward));
  }
  for (int k = steady; k < total; ++k) steps.push_back(nth_pass(layout, k, PipelinePass::backward));
  return steps;
}

int peak_passes_in_flight(const PipelineLayout& layout, int stage) {
  int alive = 0, peak = 0;
  for (const PipelineStep& step : pipeline_schedule(layout, stage)) {
    alive += step.pass == PipelinePass::forward ? 1 : -1;
    peak = std::max(peak, alive);
  }
  return peak;
}

double pipeline_bubble_fraction(const PipelineLayout& layout) {
  check_pipeline_layout(layout);
  return static_cast<double>(layout.stages - 1) / (static_cast<double>(layout.micro_batches) * layout.virtual_stages);
}

std::string to_string(const PipelineStep& step) {
  return fmt::format("{}(mb {}, chunk {})", step.pass == PipelinePass::forward ? "F" : "B", step.micro_batch,
                     step.chunk);
}

}  // namespace adamant::train
