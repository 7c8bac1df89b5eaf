#pragma once
// The GPT parameter list: Megatron-style names, shapes, and one flat layout in
// reverse order of first use (final layernorm first, embeddings last), which is
// the order in which backward completes the gradients.
#include <cstddef>
#include <vector>

#include "adamant/core/param_spec.h"
#include "adamant/model/gpt_config.h"

namespace adamant::model {

// Names (l = layer): embedding.word_embeddings.weight [padded_vocab, hidden] (tied to the
// output layer), embedding.position_embeddings.weight [seq, hidden],
// decoder.layers.l.{input_layernorm, post_attention_layernorm}.{weight, bias} [hidden],
// decoder.layers.l.self_attention.query_key_value.{weight [3 hidden, hidden], bias},
// decoder.layers.l.self_attention.dense.{weight [hidden, hidden], bias},
// decoder.layers.l.mlp.dense_h_to_4h.{weight [ffn, hidden], bias},
// decoder.layers.l.mlp.dense_4h_to_h.{weight [hidden, ffn], bias},
// decoder.final_layernorm.{weight, bias}.
// No weight decay on biases and layernorm parameters; tp_duplicate marks what Megatron
// replicates across tensor-parallel ranks (layernorms, position embeddings, row-parallel biases).
ParamList build_param_list(const GptConfig& config);

// Where each parameter of the model sits in a ParamList from build_param_list.
struct LayerParamIndex {
  std::size_t ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias;
  std::size_t ln2_weight, ln2_bias, fc_weight, fc_bias, fc_proj_weight, fc_proj_bias;
};
struct GptParamIndex {
  std::size_t word_embedding, position_embedding, final_ln_weight, final_ln_bias;
  std::vector<LayerParamIndex> layers;
};
GptParamIndex index_params(const GptConfig& config, const ParamList& params);

}  // namespace adamant::model
