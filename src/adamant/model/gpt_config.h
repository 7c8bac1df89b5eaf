#pragma once
// Sizes and regularisation of the GPT-3 model: one field per NeMo key
// (megatron_gpt_config.yaml), with NeMo's default. validate() names the key of
// any bad value; the training config maps its YAML paths onto these fields.
#include <algorithm>
#include <cstdint>
#include <string>

#include "adamant/core/dtype.h"
#include "adamant/core/option_checks.h"
#include "adamant/kernels/gelu.h"

namespace adamant::model {

struct GptConfig {
  int num_layers = 12;                     // model.num_layers
  int hidden_size = 768;                   // model.hidden_size
  int num_attention_heads = 12;            // model.num_attention_heads
  int ffn_hidden_size = 3072;              // model.ffn_hidden_size (NeMo's usual value: 4 * hidden_size)
  int seq_length = 2048;                   // model.encoder_seq_length
  int max_position_embeddings = 2048;      // model.max_position_embeddings (>= seq_length)
  int vocab_size = 0;                      // of the tokenizer, unpadded (GPT-2 BPE: 50257); not a key
  int make_vocab_size_divisible_by = 128;  // model.make_vocab_size_divisible_by
  int tensor_parallel_size = 1;            // model.tensor_model_parallel_size
  bool sequence_parallel = false;          // model.sequence_parallel (needs tensor_parallel_size > 1)
  int pipeline_parallel_size = 1;          // model.pipeline_model_parallel_size: stages (pipeline_stage.h)
  int virtual_pipeline_size = 1;           // model.virtual_pipeline_model_parallel_size: chunks per stage
  float init_method_std = 0.02f;           // model.init_method_std
  float hidden_dropout = 0.1f;             // model.hidden_dropout
  float attention_dropout = 0.1f;          // model.attention_dropout
  float layernorm_epsilon = 1e-5f;         // model.layernorm_epsilon (fixed: NeMo's default)
  // model.activations_checkpoint_granularity: selective. The GELU outputs (4 x hidden per
  // token and layer, the largest activation) are not kept: each layer's GELU backward writes
  // them back from the kept pre-activations, into one buffer shared by the layers.
  bool recompute_activation = false;
  // model.enable_cuda_graph: each training pass runs as recorded CUDA graphs (pass_graphs.h);
  // with tensor parallelism (collectives inside the passes) every pass runs directly.
  bool cuda_graph = false;
  // model.openai_gelu: GPT-2's tanh approximation of GELU instead of the exact erf form.
  bool openai_gelu = false;
  // model.bias_activation_fusion: NeMo's fused bias + GELU kernel (its config template sets it),
  // which computes GELU's tanh approximation whatever openai_gelu says; here the product's
  // epilogue (fuses_bias_gelu). Unlike NeMo's, the default is false: a config without the key
  // keeps the exact GELU it always had here.
  bool bias_activation_fusion = false;
  // model.classifier_logits_dtype: what the classifier's logits GEMM writes on a GPU, fp32 or
  // bf16 (as Megatron's bf16 output layer: half the bytes written and read by the
  // cross-entropy, whose sums stay fp32). The CPU computes them in its fp32 or fp64.
  DType classifier_logits = DType::f32;
  // The gradient buffer's dtype on a GPU: model.optim.grad_sync_dtype (the train config sets it
  // from there). bf16, as Apex's DistributedFusedAdam buckets and Megatron's buffers without
  // grad_reduce_in_fp32: the gradients are accumulated in the dtype they are reduced in, so the
  // weight-gradient GEMMs write bf16, the sync sends the buffer itself, and the norm and Adam read
  // half the bytes. The CPU keeps its fp32 or fp64, and so does a GPU for any value but bf16.
  DType grad_buffer = DType::f32;

  bool operator==(const GptConfig&) const = default;

  // The vocabulary rounded up to a multiple of make_vocab_size_divisible_by * tensor_parallel_size
  // (Megatron's padding; 50257 -> 50304 with the defaults).
  int padded_vocab_size() const;
  int head_dim() const { return hidden_size / num_attention_heads; }
  // The GELU the MLP computes, by NeMo's rule: the tanh approximation where either key asks for
  // it (the fused bias-GELU, or openai_gelu), else the exact erf form.
  kernels::GeluForm gelu() const {
    return openai_gelu || bias_activation_fusion ? kernels::GeluForm::tanh : kernels::GeluForm::exact;
  }
  // Whether the up projection and its GELU run as one product (kernels/linear_gelu.h: the GELU
  // in the cuBLASLt epilogue on a GPU), as NeMo's bias_activation_fusion asks. Not with
  // selective recomputation, whose GELU backward writes the outputs back as the separate
  // GELU kernel computes them: the forward's epilogue rounds once, and the two would differ.
  bool fuses_bias_gelu() const { return bias_activation_fusion && !recompute_activation; }
  // What one tensor-parallel rank holds: its heads (attention width local_heads() * head_dim()),
  // its columns of the MLP and its rows of the padded vocabulary.
  int local_heads() const { return num_attention_heads / tensor_parallel_size; }
  int local_ffn() const { return ffn_hidden_size / tensor_parallel_size; }
  int local_vocab() const { return padded_vocab_size() / tensor_parallel_size; }
  // A rank's largest linear weight in elements: qkv [3 local_heads() head_dim(), hidden] or the
  // MLP's [local_ffn(), hidden] and [hidden, local_ffn()].
  std::int64_t largest_linear_weight() const {
    return std::max<std::int64_t>(std::int64_t{3} * local_heads() * head_dim(), local_ffn()) * hidden_size;
  }
  // The same model on one rank: no tensor or pipeline parallelism, the same padded vocabulary (sampling from a
  // checkpoint of a tensor-parallel run, which holds the whole model).
  GptConfig whole_model() const {
    GptConfig whole = *this;
    whole.make_vocab_size_divisible_by = make_vocab_size_divisible_by * tensor_parallel_size;
    whole.tensor_parallel_size = 1;
    whole.sequence_parallel = false;
    whole.pipeline_parallel_size = 1;
    whole.virtual_pipeline_size = 1;
    return whole;
  }
  // Throws adamant::Error naming the NeMo key and the fix for any impossible value; `origin`
  // says where a key's value came from. The vocabulary is checked once it is known (vocab_size > 0).
  void validate(const KeyOrigin& origin = {}) const;
};

// Where weights trained with one GELU meet a config that computes another (a checkpoint, a
// Hugging Face folder): the form in words, and the keys that make a config compute `wanted`.
std::string gelu_form_words(kernels::GeluForm form);
std::string gelu_keys_for(kernels::GeluForm wanted);

}  // namespace adamant::model
