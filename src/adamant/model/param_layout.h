#pragma once
// The GPT parameter list: Megatron-style names, shapes, and one flat layout in
// reverse order of first use (final layernorm first, embeddings last), which is
// the order in which backward completes the gradients.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "adamant/core/param_spec.h"
#include "adamant/model/gpt_config.h"
#include "adamant/model/pipeline_stage.h"

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
// With config.tensor_parallel_size > 1 the shapes are one rank's (every rank has the same list):
// query_key_value and dense_h_to_4h are split by output rows (column-parallel), dense and
// dense_4h_to_h by input columns (row-parallel), the word embedding by vocabulary rows.
// The whole model, whatever config.pipeline_parallel_size says (checkpoints, import, export).
ParamList build_param_list(const GptConfig& config);

// Parameters of the whole model (every tensor-parallel slice and pipeline stage).
std::int64_t whole_model_parameters(const GptConfig& config);
// Training FLOPs per token as MFU counts them: 6 N + 12 layers seq hidden (N: the whole
// model's parameters; the second term is attention's q k^T and p v, forward and backward).
double model_flops_per_token(const GptConfig& config);
// The parameters one pipeline stage holds: its chunks' (the last chunk's first), each in reverse order
// of use. With one stage, the same list as build_param_list. The last stage of two or more holds the
// word embedding again for its classifier, marked tied_copy (pipeline_stage.h).
ParamList build_stage_param_list(const GptConfig& config, const PipelineStage& stage);

// How one tensor-parallel rank's parameter sits in the whole one, seen as a [full_rows, full_cols]
// matrix (a vector has one column).
enum class TensorParallelSplit {
  replicated,  // every rank holds all of it
  rows,        // of each of `parts` equal row blocks, the rank holds its 1/tp share (QKV: 3 blocks q, k, v)
  columns,     // the rank holds its 1/tp share of the columns of every row
};
struct TensorParallelSlice {
  TensorParallelSplit split = TensorParallelSplit::replicated;
  int parts = 1;
  std::int64_t full_rows = 0;
  std::int64_t full_cols = 1;

  // Index in the whole parameter of element `local` of tensor-parallel rank `rank` of `size`.
  std::size_t global_index(std::size_t local, int rank, int size) const;
  // The inverse: which rank of `size` holds element `global` of the whole parameter, and at which index
  // (a replicated parameter: every rank, reported as rank 0).
  std::pair<int, std::size_t> locate(std::size_t global, int size) const;
};
TensorParallelSlice tensor_parallel_slice(const GptConfig& config, const ParamSpec& spec);

// The shape of the whole (unsplit) parameter of which `spec` is one tensor-parallel rank's slice.
std::vector<std::int64_t> whole_shape(const GptConfig& config, const ParamSpec& spec);
// Copies between one rank's slice (spec.numel elements of element_size bytes) and the whole
// parameter: scatter_slice writes the slice's elements into their places in `whole`,
// gather_slice reads them from there.
void scatter_slice(const GptConfig& config, const ParamSpec& spec, int rank, const void* slice, void* whole,
                   std::size_t element_size);
void gather_slice(const GptConfig& config, const ParamSpec& spec, int rank, const void* whole, void* slice,
                  std::size_t element_size);

// Where each parameter of the model (or of one chunk) sits in a ParamList; kAbsentParam for what
// the chunk does not hold.
inline constexpr std::size_t kAbsentParam = ~std::size_t{0};
struct LayerParamIndex {
  std::size_t ln1_weight, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias;
  std::size_t ln2_weight, ln2_bias, fc_weight, fc_bias, fc_proj_weight, fc_proj_bias;
};
struct GptParamIndex {
  std::size_t word_embedding, position_embedding, final_ln_weight, final_ln_bias;
  std::vector<LayerParamIndex> layers;  // the chunk's layers, first to last
};
GptParamIndex index_params(const GptConfig& config, const ParamList& params);  // the whole model
GptParamIndex index_chunk_params(const ParamList& params, const ModelChunk& chunk);

}  // namespace adamant::model
