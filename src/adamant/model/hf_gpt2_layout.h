#pragma once
// Where each tensor of a Hugging Face GPT-2 (GPT2LMHeadModel) comes from in the whole
// Adamant model (tensor_parallel_size 1), and the copy between the two layouts.
//
//   transformer.wte.weight [vocab, hidden]        embedding.word_embeddings.weight, the first
//                                                 vocab rows of [padded_vocab, hidden]
//   transformer.wpe.weight [seq, hidden]          embedding.position_embeddings.weight
//   transformer.h.l.ln_1.{weight,bias}            decoder.layers.l.input_layernorm
//   transformer.h.l.attn.c_attn.weight [h, 3h]    self_attention.query_key_value.weight [3h, h], transposed
//   transformer.h.l.attn.c_attn.bias [3h]         self_attention.query_key_value.bias
//   transformer.h.l.attn.c_proj.{weight [h, h] transposed, bias}   self_attention.dense
//   transformer.h.l.ln_2.{weight,bias}            decoder.layers.l.post_attention_layernorm
//   transformer.h.l.mlp.c_fc.{weight [h, ffn] transposed, bias}    mlp.dense_h_to_4h
//   transformer.h.l.mlp.c_proj.{weight [ffn, h] transposed, bias}  mlp.dense_4h_to_h
//   transformer.ln_f.{weight,bias}                decoder.final_layernorm
//
// Hugging Face's Conv1D stores [in, out], the transpose of Megatron's [out, in]. The fused QKV
// needs no reordering: both lay out a token's projection as all queries, then all keys, then
// all values, heads in order within each. lm_head.weight is tied to transformer.wte.weight and
// not stored (as save_pretrained does).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "adamant/core/param_spec.h"
#include "adamant/model/gpt_config.h"

namespace adamant::model {

struct HfTensor {
  std::string name;                 // Hugging Face name
  std::vector<std::int64_t> shape;  // Hugging Face shape
  std::size_t param = 0;            // index in the whole model's ParamList
  bool transposed = false;          // [in, out] in the file, [out, in] here
  std::int64_t rows = 0;            // rows of the Adamant parameter it covers (the vocabulary cut)
};

// In the order Hugging Face lists a GPT-2's parameters. config must be a whole model
// (tensor_parallel_size 1) and params its build_param_list.
std::vector<HfTensor> hf_gpt2_tensors(const GptConfig& config, const ParamList& params);

// Adamant parameter -> Hugging Face tensor (hf: numel of tensor.shape elements) and back
// (fills the first tensor.rows rows of the parameter). element_size: bytes per element.
void to_hf_layout(const HfTensor& tensor, const ParamSpec& spec, const void* param, void* hf, std::size_t element_size);
void from_hf_layout(const HfTensor& tensor, const ParamSpec& spec, const void* hf, void* param,
                    std::size_t element_size);

}  // namespace adamant::model
