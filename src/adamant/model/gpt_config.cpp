#include "adamant/model/gpt_config.h"

#include "adamant/core/error.h"

namespace adamant::model {

int GptConfig::padded_vocab_size() const {
  const std::int64_t multiple = static_cast<std::int64_t>(make_vocab_size_divisible_by) * tensor_parallel_size;
  ADAMANT_CHECK(multiple > 0 && vocab_size > 0,
                "padded vocabulary: vocab_size {} and model.make_vocab_size_divisible_by {} x "
                "model.tensor_model_parallel_size {} must be positive",
                vocab_size, make_vocab_size_divisible_by, tensor_parallel_size);
  return static_cast<int>((vocab_size + multiple - 1) / multiple * multiple);
}

void GptConfig::validate() const {
  ADAMANT_CHECK(num_layers > 0, "model.num_layers is {}; set it to a positive number of transformer layers",
                num_layers);
  ADAMANT_CHECK(hidden_size > 0, "model.hidden_size is {}; set it to a positive width", hidden_size);
  ADAMANT_CHECK(num_attention_heads > 0, "model.num_attention_heads is {}; set it to a positive count",
                num_attention_heads);
  ADAMANT_CHECK(hidden_size % num_attention_heads == 0,
                "model.hidden_size {} is not divisible by model.num_attention_heads {}; pick a head count that "
                "divides it",
                hidden_size, num_attention_heads);
  ADAMANT_CHECK(ffn_hidden_size > 0, "model.ffn_hidden_size is {}; set it (usually 4 * model.hidden_size = {})",
                ffn_hidden_size, 4 * hidden_size);
  ADAMANT_CHECK(seq_length > 0, "model.encoder_seq_length is {}; set it to a positive sequence length", seq_length);
  ADAMANT_CHECK(vocab_size > 0, "the tokenizer's vocabulary size is {}; check model.tokenizer", vocab_size);
  ADAMANT_CHECK(make_vocab_size_divisible_by > 0,
                "model.make_vocab_size_divisible_by is {}; use a positive value like 128",
                make_vocab_size_divisible_by);
  ADAMANT_CHECK(tensor_parallel_size > 0, "model.tensor_model_parallel_size is {}; use 1 or more",
                tensor_parallel_size);
  ADAMANT_CHECK(num_attention_heads % tensor_parallel_size == 0 && ffn_hidden_size % tensor_parallel_size == 0,
                "model.tensor_model_parallel_size {} must divide model.num_attention_heads {} and "
                "model.ffn_hidden_size {}",
                tensor_parallel_size, num_attention_heads, ffn_hidden_size);
  ADAMANT_CHECK(!sequence_parallel || tensor_parallel_size > 1,
                "model.sequence_parallel is true but model.tensor_model_parallel_size is 1; sequence parallelism "
                "splits the tensor-parallel group's work, so set model.sequence_parallel=false or use a "
                "tensor-parallel size of 2 or more");
  // A sequence-parallel rank holds seq_length / tp positions of every sample, and its share of
  // the [tokens, hidden] stream starts on a 4-element boundary (one dropout draw covers four).
  ADAMANT_CHECK(!sequence_parallel || (seq_length % tensor_parallel_size == 0 && hidden_size % 4 == 0),
                "model.sequence_parallel needs model.encoder_seq_length ({}) divisible by "
                "model.tensor_model_parallel_size ({}) and model.hidden_size ({}) divisible by 4",
                seq_length, tensor_parallel_size, hidden_size);
  ADAMANT_CHECK(init_method_std > 0.0f, "model.init_method_std is {}; use a positive value like 0.02", init_method_std);
  ADAMANT_CHECK(hidden_dropout >= 0.0f && hidden_dropout < 1.0f, "model.hidden_dropout is {}; it must be in [0, 1)",
                hidden_dropout);
  ADAMANT_CHECK(attention_dropout >= 0.0f && attention_dropout < 1.0f,
                "model.attention_dropout is {}; it must be in [0, 1)", attention_dropout);
  ADAMANT_CHECK(layernorm_epsilon > 0.0f, "model.layernorm_epsilon is {}; use a positive value like 1e-5",
                layernorm_epsilon);
  padded_vocab_size();  // checks the padding multiple
}

}  // namespace adamant::model
