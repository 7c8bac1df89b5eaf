#pragma once
// The bytes of every buffer GptModel allocates, as a function of its constructor's arguments: the
// constructor sizes its buffers from here, and the memory planner (train/rank_memory.h) adds them up
// for layouts no process has built.
#include <cstddef>
#include <vector>

#include "adamant/core/device.h"
#include "adamant/core/dtype.h"
#include "adamant/core/param_spec.h"
#include "adamant/model/activations.h"
#include "adamant/model/gpt_config.h"
#include "adamant/model/pipeline_stage.h"

namespace adamant::model {

// Where backward forms each parameter's gradient of one micro-batch: the linear layers' weights
// and the embeddings accumulate in place in the gradient buffer (kAccumulatedInPlace), their
// kernels adding to it; every other parameter (biases and layernorms, whose kernels overwrite;
// 0.05% of GPT-3 1.3B's elements) has a 64-element aligned place in a per-micro-batch scratch
// of scratch_numel elements, from which it is added (a step's first backward writes such a
// gradient straight into the buffer where its place there is as aligned; GptModel::discard_grads).
struct MicroGradLayout {
  static constexpr std::size_t kAccumulatedInPlace = ~std::size_t{0};
  static constexpr std::size_t kAlignment = 64;  // elements: 256-byte aligned fp32 views
  std::vector<std::size_t> offsets;              // per parameter of the stage's list
  std::size_t scratch_numel = 0;
};
MicroGradLayout micro_grad_layout(const ParamList& params, const PipelineStage& stage);

// The dtypes GptModel computes in on `device` with `weight_dtype` weights; `classifier_logits`
// (model.classifier_logits_dtype) and `grad_buffer` (GptConfig::grad_buffer) apply on a GPU only.
struct ModelDtypes {
  DType weight = DType::f32;
  DType compute_weight = DType::f32;  // what the kernels read: an fp32 working copy of 16-bit weights on the CPU
  DType grad = DType::f32;            // statistics, and the per-micro-batch gradient scratch
  DType grad_buffer = DType::f32;     // the gradient buffer: grad, or bf16 on a GPU
  ActivationDtypes activations;
};
ModelDtypes model_dtypes(DType weight_dtype, Device device, DType classifier_logits = DType::f32,
                         DType grad_buffer = DType::f32);

// Bytes of each buffer; host_statistics and host_loss_reads are on the host, the others on the model's device.
struct ModelMemory {
  std::size_t weights = 0;
  std::size_t working_weights = 0;
  std::size_t grads = 0;
  std::size_t micro_grads = 0;
  std::size_t activations = 0;  // activations_saved_per_pass * passes_in_flight + activations_scratch
  std::size_t activations_saved_per_pass = 0;
  std::size_t activations_scratch = 0;
  std::size_t tokens = 0;           // token ids of every pass in flight
  std::size_t targets = 0;          // target ids of the pass running
  std::size_t pass_samples = 0;     // each pass in flight's first sample index (its dropout masks)
  std::size_t host_statistics = 0;  // one row of logits copied back (next_token_logits)
  std::size_t host_loss_reads = 0;  // LossReadback: page-locked on a GPU
  // In the model's kernel workspace on a GPU: the attention backward's row statistics
  // (kernels::flash_attention_statistics_bytes of a micro-batch) and its score scratch
  // (attention_score_scratch_taken).
  std::size_t attention_statistics = 0;
  std::size_t attention_scores = 0;
  // In the model's kernel workspace on the CPU: the product a linear backward adds to a weight
  // gradient (kernels::WorkspaceNeeds::weight_grad_elements, fp64-sized).
  std::size_t weight_grad_scratch = 0;

  std::size_t on_host() const { return host_statistics + host_loss_reads; }

  std::size_t on_device() const {
    return weights + working_weights + grads + micro_grads + activations + tokens + targets + pass_samples +
           attention_statistics + attention_scores + weight_grad_scratch;
  }
};

// The score scratch of the GPU flash attention backward (kernels/flash_attention_scores.h) for
// all of a micro-batch's (sample, head) slots with attention dropout, where reading the stored
// score gradients beats recomputing them and drawing the mask again in the query pass (up to
// 14% of the attention backward on an H100, most at head size 128 and sequence 8192; at GPT-3
// 126M's shape the backward alone is 2% slower, yet training is 0.8% faster: BENCHMARKS.md),
// and without dropout at head size 128 (8% faster at GPT-3 1.3B's shape, 4% at sequence 8192,
// on an H100); none without dropout at the smaller head sizes, where the stored form takes longer
// (13% at head size 64, 24% at head size 64 and sequence 8192) and the memory is better kept.
std::size_t attention_score_scratch_bytes(const GptConfig& config, int micro_batch_size, Device device);
// What the model takes of it: the scratch grows with the square of the sequence, so only as
// many slots as fit in kAttentionScoresShare of the activations, rounded down to the largest
// of the even groups the backward then runs its passes in (kernels/flash_attention.h), and
// none when that group would hold fewer than kAttentionScoreGroupKeyTiles key tiles (too few
// blocks to fill the GPU in each pass). GPT-3 126M at micro-batch 8 and sequence 2048 takes
// all 96 slots; at sequence 8192 and micro-batch 2, two groups of 12 of its 24 (each group
// costs the passes a ramp and a tail: 1.53 ms a layer for all 24 at once, 1.55 in two groups,
// 1.60 in three, 1.66 recomputing, on an H200).
std::size_t attention_score_scratch_taken(const GptConfig& config, int micro_batch_size, Device device,
                                          std::size_t activations);
inline constexpr std::size_t kAttentionScoresShare = 6;           // at most 1 / 6
inline constexpr int kScoresWithoutDropoutHeadDim = 128;          // and from this head size without dropout
inline constexpr std::size_t kAttentionScoreGroupKeyTiles = 512;  // 256 key-pass blocks of 128 keys

// GptModel(config, weight_dtype, micro_batch_size, device, seed, padded_numel, tp, stage, passes_in_flight).
ModelMemory model_memory(const GptConfig& config, DType weight_dtype, int micro_batch_size, Device device,
                         std::size_t padded_numel, const PipelineStage& stage, int passes_in_flight);

}  // namespace adamant::model
