#include "adamant/train/rank_memory.h"

#include <cstdint>

#include "adamant/model/model_memory.h"
#include "adamant/model/param_layout.h"
#include "adamant/model/pipeline_stage.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/bucketed_grads.h"
#include "adamant/optim/update_ranges.h"
#include "adamant/train/pipeline_schedule.h"

namespace adamant::train {

namespace {

// kernels/cuda/cublaslt_context.h: the cuBLASLt workspace of the compute stream, counted in a GPU run's peak.
constexpr double kCudaGemmWorkspaceBytes = 32.0 * 1024 * 1024;

struct OptimizerMemory {
  std::size_t padded_numel = 0;  // what the model's flat buffers hold
  double state = 0;
  double workspaces = 0;
};

// What BucketedAdam (fused_adam or distributed_fused_adam) allocates for `params`: its bucket plan's
// padding, the state of data-parallel rank 0's ranges (every rank's shards are of equal size), the
// segment tables and the grad norm, and the bf16 staging copy of fp32 gradients when they sync in bf16
// (`grad_buffer`: the model's gradient buffer dtype).
OptimizerMemory optimizer_memory(const optim::OptimizerOptions& o, const ParamList& params, int dp, DType grad_buffer) {
  const bool sharded = o.name == "distributed_fused_adam";
  const DType sync_dtype = sharded ? o.grad_sync_dtype : DType::f32;
  const optim::BucketPlan plan(params, optim::BucketPlan::capacity_for(o.bucket_cap_mb, dtype_size(sync_dtype)),
                               sharded ? dp : 1);
  const optim::UpdateRanges ranges = sharded ? optim::UpdateRanges::rank_shards(plan, params, 0, {})
                                             : optim::UpdateRanges::whole_model(params, plan.padded_numel(), {});
  double main_bytes = 4;                                        // fp32 main weights
  if (sharded && o.store_param_remainders) main_bytes = 2;      // their low 16 bits
  if (!sharded && o.model_dtype == DType::f32) main_bytes = 0;  // the model weights themselves
  OptimizerMemory m;
  m.padded_numel = plan.padded_numel();
  m.state = (main_bytes + 2 * sizeof(float)) * static_cast<double>(ranges.state_numel());
  m.workspaces =
      static_cast<double>((ranges.segments().size() + ranges.norm_segments().size()) * sizeof(std::int64_t)) +
      sizeof(double);
  if (optim::sends_bf16_copy(sync_dtype, dp, grad_buffer))
    m.workspaces += 2.0 * static_cast<double>(plan.padded_numel());
  return m;
}

}  // namespace

RankMemory stage_memory(const TrainConfig& config, const model::GptConfig& gpt, int dp, int micro_batches, int stage,
                        Device device) {
  const model::PipelineStage place = model::pipeline_stage(gpt, stage);
  const ParamList params = model::build_stage_param_list(gpt, place);
  const DType grad_buffer =
      model::model_dtypes(weight_dtype_of(config), device, gpt.classifier_logits, gpt.grad_buffer).grad_buffer;
  const OptimizerMemory optimizer = optimizer_memory(optimizer_options_of(config), params, dp, grad_buffer);
  const PipelineLayout pipeline{gpt.pipeline_parallel_size, gpt.virtual_pipeline_size, micro_batches};
  RankMemory r;
  r.stage = stage;
  r.passes_in_flight = peak_passes_in_flight(pipeline, stage);
  r.parameters = static_cast<double>(params.total_numel);
  const model::ModelMemory model = model::model_memory(gpt, weight_dtype_of(config), config.data.micro_batch_size,
                                                       device, optimizer.padded_numel, place, r.passes_in_flight);
  r.weights = static_cast<double>(model.weights);
  r.grads = static_cast<double>(model.grads);
  r.optimizer_state = optimizer.state;
  r.activations = static_cast<double>(model.activations);
  r.workspaces = static_cast<double>(model.working_weights + model.micro_grads + model.tokens + model.targets +
                                     model.attention_statistics + model.attention_scores + model.weight_grad_scratch) +
                 optimizer.workspaces;
  if (device.is_cuda()) {
    r.workspaces += kCudaGemmWorkspaceBytes;
    r.host = static_cast<double>(model.on_host());
  } else {
    r.workspaces += static_cast<double>(model.on_host());
  }
  return r;
}

RankMemory busiest_rank_memory(const TrainConfig& config, const model::GptConfig& gpt, int dp, int micro_batches,
                               Device device) {
  RankMemory busiest;
  for (int stage = 0; stage < gpt.pipeline_parallel_size; ++stage) {
    const RankMemory m = stage_memory(config, gpt, dp, micro_batches, stage, device);
    if (stage == 0 || m.total() > busiest.total()) busiest = m;
  }
  return busiest;
}

}  // namespace adamant::train
