#include "adamant/model/gpt_config.h"

#include "adamant/core/error.h"

namespace adamant::model {

std::string gelu_form_words(kernels::GeluForm form) {
  return form == kernels::GeluForm::tanh ? "GELU's tanh approximation" : "the exact (erf) GELU";
}

std::string gelu_keys_for(kernels::GeluForm wanted) {
  return wanted == kernels::GeluForm::tanh
             ? "set model.openai_gelu=true (or model.bias_activation_fusion=true, NeMo's fused bias-GELU, which "
               "computes the same)"
             : "set model.openai_gelu=false and model.bias_activation_fusion=false (NeMo's fused bias-GELU "
               "computes the tanh approximation)";
}

int GptConfig::padded_vocab_size() const {
  const std::int64_t multiple = static_cast<std::int64_t>(make_vocab_size_divisible_by) * tensor_parallel_size;
  ADAMANT_CHECK(multiple > 0 && vocab_size > 0,
                "padded vocabulary: vocab_size {} and model.make_vocab_size_divisible_by {} x "
                "model.tensor_model_parallel_size {} must be positive",
                vocab_size, make_vocab_size_divisible_by, tensor_parallel_size);
  return static_cast<int>((vocab_size + multiple - 1) / multiple * multiple);
}

void GptConfig::validate(const KeyOrigin& origin) const {
  const OptionChecks check(origin);
  check.at_least("model.num_layers", num_layers, 1, "the number of transformer layers");
  check.at_least("model.hidden_size", hidden_size, 1, "the model width");
  check.at_least("model.ffn_hidden_size", ffn_hidden_size, 1, "the MLP width, usually 4 x hidden_size");
  check.at_least("model.num_attention_heads", num_attention_heads, 1, "the number of attention heads");
  check.divisible("model.hidden_size", hidden_size, "model.num_attention_heads", num_attention_heads);
  check.at_least("model.encoder_seq_length", seq_length, 1, "the sequence length in tokens, e.g. 2048");
  check.at_least("model.max_position_embeddings", max_position_embeddings, 1, "the number of learned positions");
  if (seq_length > max_position_embeddings) {
    fail(
        "model.encoder_seq_length ({}) must be <= model.max_position_embeddings ({}){}; raise "
        "max_position_embeddings or set it to ${{model.encoder_seq_length}}",
        seq_length, max_position_embeddings, check.where("model.encoder_seq_length"));
  }
  check.at_least("model.make_vocab_size_divisible_by", make_vocab_size_divisible_by, 1,
                 "the vocabulary padding multiple, e.g. 128");
  check.at_least("model.tensor_model_parallel_size", tensor_parallel_size, 1, "the tensor-parallel group size");
  if (num_attention_heads % tensor_parallel_size != 0 || ffn_hidden_size % tensor_parallel_size != 0) {
    fail(
        "model.tensor_model_parallel_size {} must divide model.num_attention_heads {} and model.ffn_hidden_size "
        "{}{}; each tensor-parallel rank holds whole heads and an equal share of the MLP",
        tensor_parallel_size, num_attention_heads, ffn_hidden_size, check.where("model.tensor_model_parallel_size"));
  }
  if (sequence_parallel && tensor_parallel_size == 1) {
    fail(
        "model.sequence_parallel is true but model.tensor_model_parallel_size is 1{}; sequence parallelism "
        "splits the tensor-parallel group's work, so set model.sequence_parallel=false or use a tensor-parallel "
        "size of 2 or more",
        check.where("model.sequence_parallel"));
  }
  // A sequence-parallel rank holds seq_length / tp positions of every sample, and its share of
  // the [tokens, hidden] stream starts on a 4-element boundary (one dropout draw covers four).
  if (sequence_parallel && (seq_length % tensor_parallel_size != 0 || hidden_size % 4 != 0)) {
    fail(
        "model.sequence_parallel needs model.encoder_seq_length ({}) divisible by "
        "model.tensor_model_parallel_size ({}) and model.hidden_size ({}) divisible by 4{}",
        seq_length, tensor_parallel_size, hidden_size, check.where("model.sequence_parallel"));
  }
  if (classifier_logits != DType::f32 && classifier_logits != DType::bf16) {
    fail("model.classifier_logits_dtype: unsupported value '{}'{}; use fp32 (float32) or bf16 (bfloat16)",
         dtype_name(classifier_logits), check.where("model.classifier_logits_dtype"));
  }
  check.at_least("model.pipeline_model_parallel_size", pipeline_parallel_size, 1, "the number of pipeline stages");
  check.at_least("model.virtual_pipeline_model_parallel_size", virtual_pipeline_size, 1,
                 "the model chunks per pipeline stage (1, or null, for plain 1F1B)");
  if (virtual_pipeline_size > 1 && pipeline_parallel_size == 1) {
    fail(
        "model.virtual_pipeline_model_parallel_size is {} but model.pipeline_model_parallel_size is 1{}; the "
        "interleaved schedule splits each pipeline stage's layers into chunks, so set it to null (1) or use 2 or more "
        "stages",
        virtual_pipeline_size, check.where("model.virtual_pipeline_model_parallel_size"));
  }
  if (num_layers % (pipeline_parallel_size * virtual_pipeline_size) != 0) {
    fail(
        "model.num_layers ({}) is not divisible by model.pipeline_model_parallel_size ({}) x "
        "model.virtual_pipeline_model_parallel_size ({}){}; every model chunk holds the same number of layers, so "
        "choose stages and chunks whose product divides the layers",
        num_layers, pipeline_parallel_size, virtual_pipeline_size, check.where("model.pipeline_model_parallel_size"));
  }
  check.positive("model.init_method_std", init_method_std, "the standard deviation of the weight init, e.g. 0.02");
  constexpr std::string_view kDropout = "a dropout probability, e.g. 0.1 (0 disables it)";
  check.fraction("model.hidden_dropout", hidden_dropout, kDropout);
  check.fraction("model.attention_dropout", attention_dropout, kDropout);
  check.positive("model.layernorm_epsilon", layernorm_epsilon, "the layernorm epsilon, e.g. 1e-5");
  if (vocab_size != 0) {
    ADAMANT_CHECK(vocab_size > 0, "the tokenizer's vocabulary size is {}; check model.tokenizer", vocab_size);
    padded_vocab_size();
  }
}

}  // namespace adamant::model
