#include "adamant/model/param_layout.h"

#include <fmt/format.h>

#include <string>

namespace adamant::model {

namespace {

std::string layer_name(int layer, const char* suffix) { return fmt::format("decoder.layers.{}.{}", layer, suffix); }

}  // namespace

ParamList build_param_list(const GptConfig& config) {
  config.validate();
  const std::int64_t hidden = config.hidden_size, ffn = config.ffn_hidden_size;
  std::vector<ParamSpec> in_order_of_use;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, bool decay, bool tp_duplicate) {
    ParamSpec spec;
    spec.name = std::move(name);
    spec.shape = std::move(shape);
    spec.numel = 1;
    for (const std::int64_t d : spec.shape) spec.numel *= static_cast<std::size_t>(d);
    spec.weight_decay = decay;
    spec.tp_duplicate = tp_duplicate;
    in_order_of_use.push_back(std::move(spec));
  };
  auto add_layernorm = [&](const std::string& prefix) {
    add(prefix + ".weight", {hidden}, false, true);
    add(prefix + ".bias", {hidden}, false, true);
  };
  add("embedding.word_embeddings.weight", {config.padded_vocab_size(), hidden}, true, false);
  add("embedding.position_embeddings.weight", {config.seq_length, hidden}, true, true);
  for (int l = 0; l < config.num_layers; ++l) {
    add_layernorm(layer_name(l, "input_layernorm"));
    add(layer_name(l, "self_attention.query_key_value.weight"), {3 * hidden, hidden}, true, false);
    add(layer_name(l, "self_attention.query_key_value.bias"), {3 * hidden}, false, false);
    add(layer_name(l, "self_attention.dense.weight"), {hidden, hidden}, true, false);
    add(layer_name(l, "self_attention.dense.bias"), {hidden}, false, true);
    add_layernorm(layer_name(l, "post_attention_layernorm"));
    add(layer_name(l, "mlp.dense_h_to_4h.weight"), {ffn, hidden}, true, false);
    add(layer_name(l, "mlp.dense_h_to_4h.bias"), {ffn}, false, false);
    add(layer_name(l, "mlp.dense_4h_to_h.weight"), {hidden, ffn}, true, false);
    add(layer_name(l, "mlp.dense_4h_to_h.bias"), {hidden}, false, true);
  }
  add_layernorm("decoder.final_layernorm");

  ParamList list;
  list.params.assign(in_order_of_use.rbegin(), in_order_of_use.rend());
  for (ParamSpec& spec : list.params) {
    spec.offset = list.total_numel;
    list.total_numel += spec.numel;
  }
  return list;
}

GptParamIndex index_params(const GptConfig& config, const ParamList& params) {
  GptParamIndex index{};
  index.word_embedding = params.index_of("embedding.word_embeddings.weight");
  index.position_embedding = params.index_of("embedding.position_embeddings.weight");
  index.final_ln_weight = params.index_of("decoder.final_layernorm.weight");
  index.final_ln_bias = params.index_of("decoder.final_layernorm.bias");
  for (int l = 0; l < config.num_layers; ++l) {
    auto at = [&](const char* suffix) { return params.index_of(layer_name(l, suffix)); };
    index.layers.push_back(
        {at("input_layernorm.weight"), at("input_layernorm.bias"), at("self_attention.query_key_value.weight"),
         at("self_attention.query_key_value.bias"), at("self_attention.dense.weight"), at("self_attention.dense.bias"),
         at("post_attention_layernorm.weight"), at("post_attention_layernorm.bias"), at("mlp.dense_h_to_4h.weight"),
         at("mlp.dense_h_to_4h.bias"), at("mlp.dense_4h_to_h.weight"), at("mlp.dense_4h_to_h.bias")});
  }
  return index;
}

}  // namespace adamant::model
