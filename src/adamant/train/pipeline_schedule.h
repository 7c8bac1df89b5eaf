#pragma once
// The order of forward and backward passes of one optimizer step on each pipeline stage
// (model.pipeline_model_parallel_size), as data: Megatron's schedules.
//
// 1F1B: stage s of p runs min(p - s - 1, m) forward passes to fill the pipeline, then
// alternates one forward and one backward, then drains the remaining backwards. At most
// p - s micro-batches' activations are alive on stage s, whatever the micro-batch count m,
// and the pipeline idles (p - 1) forward+backward times per step: a bubble of (p - 1) / m
// of the ideal step.
//
// Interleaved (model.virtual_pipeline_model_parallel_size = v > 1): each rank holds v
// chunks of layers, chunk c of stage s being virtual stage c * p + s. Micro-batches go in
// groups of p through chunk 0, then chunk 1, ...; the warm-up is longer ((p - s - 1) * 2 +
// (v - 1) * p passes) and the bubble shrinks to (p - 1) / (m v). Megatron requires m to be a
// multiple of p.
#include <string>
#include <vector>

namespace adamant::train {

struct PipelineLayout {
  int stages = 1;          // p: model.pipeline_model_parallel_size
  int virtual_stages = 1;  // v: model chunks per stage (1: plain 1F1B)
  int micro_batches = 1;   // m: per data-parallel rank and step
};

enum class PipelinePass { forward, backward };

struct PipelineStep {
  PipelinePass pass = PipelinePass::forward;
  int micro_batch = 0;
  int chunk = 0;  // which of the stage's v chunks

  bool operator==(const PipelineStep&) const = default;
};

// Throws adamant::Error, naming the keys, for layouts that cannot run: fewer than one stage,
// micro-batches or chunk; 1F1B with fewer micro-batches than stages; interleaving with a
// micro-batch count that is not a multiple of the stages.
void check_pipeline_layout(const PipelineLayout& layout);

// The passes stage `stage` runs for one step, in order: every (micro-batch, chunk) forward once
// and backward once, a backward after its forward.
std::vector<PipelineStep> pipeline_schedule(const PipelineLayout& layout, int stage);

// The most (micro-batch, chunk) forward passes whose activations `stage` holds at once (forward
// run, backward not yet): p - s for 1F1B. Each holds one chunk's layers' activations.
int peak_passes_in_flight(const PipelineLayout& layout, int stage);

// (p - 1) / (m v): the idle time of a step over its ideal time, for passes of equal cost per chunk.
double pipeline_bubble_fraction(const PipelineLayout& layout);

std::string to_string(const PipelineStep& step);

}  // namespace adamant::train
