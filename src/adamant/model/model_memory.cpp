#include "adamant/model/model_memory.h"

#include <algorithm>
#include <cstdint>

#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/flash_attention_scores.h"
#include "adamant/kernels/workspace.h"
#include "adamant/model/loss_readback.h"
#include "adamant/model/param_layout.h"

namespace adamant::model {

MicroGradLayout micro_grad_layout(const ParamList& params, const PipelineStage& stage) {
  std::vector<bool> in_place(params.size(), false);
  for (const ModelChunk& chunk : stage.chunks) {
    const GptParamIndex index = index_chunk_params(params, chunk);
    for (const LayerParamIndex& layer : index.layers) {
      for (const std::size_t param : {layer.qkv_weight, layer.proj_weight, layer.fc_weight, layer.fc_proj_weight}) {
        in_place[param] = true;
      }
    }
    // The classifier's GEMMs and the embedding backward add to the embeddings' gradients.
    if (chunk.has_embedding || chunk.has_head) in_place[index.word_embedding] = true;
    if (chunk.has_embedding) in_place[index.position_embedding] = true;
  }
  MicroGradLayout layout;
  layout.offsets.assign(params.size(), MicroGradLayout::kAccumulatedInPlace);
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (in_place[p]) continue;
    layout.offsets[p] = layout.scratch_numel;
    layout.scratch_numel +=
        (params[p].numel + MicroGradLayout::kAlignment - 1) / MicroGradLayout::kAlignment * MicroGradLayout::kAlignment;
  }
  return layout;
}

ModelDtypes model_dtypes(DType weight_dtype, Device device, DType classifier_logits, DType grad_buffer) {
  ModelDtypes d;
  d.weight = weight_dtype;
  d.grad = weight_dtype == DType::f64 ? DType::f64 : DType::f32;
  d.grad_buffer = device.is_cuda() && grad_buffer == DType::bf16 ? DType::bf16 : d.grad;
  d.compute_weight = kernels::model_dtype(device, kernels::Role::weight, d.grad);
  d.activations.activation = kernels::model_dtype(device, kernels::Role::activation, d.grad);
  d.activations.statistic = d.grad;
  d.activations.logits = device.is_cuda() && classifier_logits == DType::bf16 ? DType::bf16 : d.grad;
  d.activations.classifier_chunk_elements = kernels::classifier_chunk_elements(device);
  d.activations.device = device;
  return d;
}

std::size_t attention_score_scratch_bytes(const GptConfig& config, int micro_batch_size, Device device) {
  if (!device.is_cuda() || (config.attention_dropout <= 0.0f && config.head_dim() < kScoresWithoutDropoutHeadDim)) {
    return 0;
  }
  return kernels::flash_attention_scores_bytes(std::max(micro_batch_size, 0), config.local_heads(), config.seq_length);
}

std::size_t attention_score_scratch_taken(const GptConfig& config, int micro_batch_size, Device device,
                                          std::size_t activations) {
  const std::size_t all = attention_score_scratch_bytes(config, micro_batch_size, device);
  if (all == 0) return 0;
  const std::size_t slot = kernels::flash_attention_scores_bytes(1, 1, config.seq_length);
  const std::size_t fitting = std::min(all, activations / kAttentionScoresShare) / slot;
  if (fitting == 0) return 0;
  // The backward runs as even groups as the scratch allows: room for more slots than its
  // largest group would hold nothing.
  const std::size_t slots = all / slot;
  const std::size_t groups = (slots + fitting - 1) / fitting;
  const std::size_t group = (slots + groups - 1) / groups;
  const auto key_tiles =
      static_cast<std::size_t>((config.seq_length + kernels::kFlashScoreTileRows - 1) / kernels::kFlashScoreTileRows);
  return group * key_tiles >= kAttentionScoreGroupKeyTiles ? group * slot : 0;
}

ModelMemory model_memory(const GptConfig& config, DType weight_dtype, int micro_batch_size, Device device,
                         std::size_t padded_numel, const PipelineStage& stage, int passes_in_flight) {
  const ParamList params = build_stage_param_list(config, stage);
  const ModelDtypes dtypes = model_dtypes(weight_dtype, device, config.classifier_logits, config.grad_buffer);
  const std::size_t buffer_numel = std::max(params.total_numel, padded_numel);
  const std::size_t grad_size = dtype_size(dtypes.grad);
  const ActivationLayout layout =
      ActivationLayout::plan(config, micro_batch_size, dtypes.activations, stage.chunks.front().num_layers);
  const std::size_t tokens = static_cast<std::size_t>(micro_batch_size) * config.seq_length;
  ModelMemory m;
  m.weights = buffer_numel * dtype_size(weight_dtype);
  if (dtypes.compute_weight != weight_dtype) m.working_weights = params.total_numel * dtype_size(dtypes.compute_weight);
  m.grads = buffer_numel * dtype_size(dtypes.grad_buffer);
  m.micro_grads = micro_grad_layout(params, stage).scratch_numel * grad_size;
  m.activations_saved_per_pass = layout.saved_bytes;
  m.activations_scratch = layout.scratch_bytes;
  m.activations = layout.total_bytes(passes_in_flight);
  m.tokens = static_cast<std::size_t>(passes_in_flight) * tokens * sizeof(std::int32_t);
  m.targets = tokens * sizeof(std::int32_t);
  m.pass_samples = static_cast<std::size_t>(passes_in_flight) * sizeof(std::uint64_t);
  m.host_statistics = static_cast<std::size_t>(config.padded_vocab_size()) * grad_size;
  m.host_loss_reads = LossReadback::host_bytes(tokens, dtypes.grad);
  if (device.is_cuda()) {
    m.attention_statistics = kernels::flash_attention_statistics_bytes(std::max(micro_batch_size, 0),
                                                                       config.local_heads(), config.seq_length);
  }
  m.attention_scores = attention_score_scratch_taken(config, micro_batch_size, device, m.activations);
  if (!device.is_cuda()) m.weight_grad_scratch = kernels::weight_grad_scratch_bytes(config.largest_linear_weight());
  return m;
}

}  // namespace adamant::model
