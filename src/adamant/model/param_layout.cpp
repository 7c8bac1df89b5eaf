#include "adamant/model/param_layout.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace adamant::model {

namespace {

std::string layer_name(int layer, const char* suffix) { return fmt::format("decoder.layers.{}.{}", layer, suffix); }

constexpr const char* kWordEmbeddingName = "embedding.word_embeddings.weight";

// The parameters of one chunk in order of first use in forward. tied_copy: the chunk's head reads a
// word embedding that another stage owns.
void add_chunk_params(const GptConfig& config, const ModelChunk& chunk, bool tied_copy,
                      std::vector<ParamSpec>& in_order_of_use) {
  const std::int64_t hidden = config.hidden_size, ffn = config.local_ffn();
  const std::int64_t width = static_cast<std::int64_t>(config.local_heads()) * config.head_dim();  // attention
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
  if (chunk.has_embedding) {
    add(kWordEmbeddingName, {config.local_vocab(), hidden}, true, false);
    add("embedding.position_embeddings.weight", {config.seq_length, hidden}, true, true);
  }
  for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
    add_layernorm(layer_name(l, "input_layernorm"));
    add(layer_name(l, "self_attention.query_key_value.weight"), {3 * width, hidden}, true, false);
    add(layer_name(l, "self_attention.query_key_value.bias"), {3 * width}, false, false);
    add(layer_name(l, "self_attention.dense.weight"), {hidden, width}, true, false);
    add(layer_name(l, "self_attention.dense.bias"), {hidden}, false, true);
    add_layernorm(layer_name(l, "post_attention_layernorm"));
    add(layer_name(l, "mlp.dense_h_to_4h.weight"), {ffn, hidden}, true, false);
    add(layer_name(l, "mlp.dense_h_to_4h.bias"), {ffn}, false, false);
    add(layer_name(l, "mlp.dense_4h_to_h.weight"), {hidden, ffn}, true, false);
    add(layer_name(l, "mlp.dense_4h_to_h.bias"), {hidden}, false, true);
  }
  if (chunk.has_head) {
    add_layernorm("decoder.final_layernorm");
    if (!chunk.has_embedding) {
      add(kWordEmbeddingName, {config.local_vocab(), hidden}, true, false);
      in_order_of_use.back().tied_copy = tied_copy;
    }
  }
}

ParamList reversed_list(const std::vector<ParamSpec>& in_order_of_use) {
  ParamList list;
  list.params.assign(in_order_of_use.rbegin(), in_order_of_use.rend());
  for (ParamSpec& spec : list.params) {
    spec.offset = list.total_numel;
    list.total_numel += spec.numel;
  }
  return list;
}

// The whole model as one chunk.
ModelChunk whole_chunk(const GptConfig& config) { return {0, 0, config.num_layers, true, true}; }

}  // namespace

ParamList build_param_list(const GptConfig& config) {
  config.validate();
  std::vector<ParamSpec> in_order_of_use;
  add_chunk_params(config, whole_chunk(config), false, in_order_of_use);
  return reversed_list(in_order_of_use);
}

ParamList build_stage_param_list(const GptConfig& config, const PipelineStage& stage) {
  config.validate();
  std::vector<ParamSpec> in_order_of_use;
  for (const ModelChunk& chunk : stage.chunks)
    add_chunk_params(config, chunk, stage.holds_tied_copy(), in_order_of_use);
  return reversed_list(in_order_of_use);
}

std::size_t TensorParallelSlice::global_index(std::size_t local, int rank, int size) const {
  const auto r = static_cast<std::size_t>(rank), t = static_cast<std::size_t>(size);
  const auto cols = static_cast<std::size_t>(full_cols);
  switch (split) {
    case TensorParallelSplit::replicated:
      return local;
    case TensorParallelSplit::rows: {
      const std::size_t part_rows = static_cast<std::size_t>(full_rows) / static_cast<std::size_t>(parts);
      const std::size_t local_part_rows = part_rows / t;
      const std::size_t row = local / cols, col = local % cols;
      const std::size_t part = row / local_part_rows, within = row % local_part_rows;
      return (part * part_rows + r * local_part_rows + within) * cols + col;
    }
    case TensorParallelSplit::columns: {
      const std::size_t local_cols = cols / t;
      const std::size_t row = local / local_cols, col = local % local_cols;
      return row * cols + r * local_cols + col;
    }
  }
  return local;
}

std::pair<int, std::size_t> TensorParallelSlice::locate(std::size_t global, int size) const {
  const auto t = static_cast<std::size_t>(size);
  const auto cols = static_cast<std::size_t>(full_cols);
  const std::size_t row = global / cols, col = global % cols;
  switch (split) {
    case TensorParallelSplit::replicated:
      return {0, global};
    case TensorParallelSplit::rows: {
      const std::size_t part_rows = static_cast<std::size_t>(full_rows) / static_cast<std::size_t>(parts);
      const std::size_t local_part_rows = part_rows / t;
      const std::size_t part = row / part_rows, in_part = row % part_rows;
      const std::size_t local_row = part * local_part_rows + in_part % local_part_rows;
      return {static_cast<int>(in_part / local_part_rows), local_row * cols + col};
    }
    case TensorParallelSplit::columns: {
      const std::size_t local_cols = cols / t;
      return {static_cast<int>(col / local_cols), row * local_cols + col % local_cols};
    }
  }
  return {0, global};
}

TensorParallelSlice tensor_parallel_slice(const GptConfig& config, const ParamSpec& spec) {
  const std::int64_t hidden = config.hidden_size, ffn = config.ffn_hidden_size;
  const std::string& name = spec.name;
  auto rows = [](int parts, std::int64_t full_rows, std::int64_t full_cols) {
    return TensorParallelSlice{TensorParallelSplit::rows, parts, full_rows, full_cols};
  };
  if (name == "embedding.word_embeddings.weight") return rows(1, config.padded_vocab_size(), hidden);
  if (name.ends_with("self_attention.query_key_value.weight")) return rows(3, 3 * hidden, hidden);
  if (name.ends_with("self_attention.query_key_value.bias")) return rows(3, 3 * hidden, 1);
  if (name.ends_with("mlp.dense_h_to_4h.weight")) return rows(1, ffn, hidden);
  if (name.ends_with("mlp.dense_h_to_4h.bias")) return rows(1, ffn, 1);
  if (name.ends_with("self_attention.dense.weight")) {
    return {TensorParallelSplit::columns, 1, hidden, hidden};
  }
  if (name.ends_with("mlp.dense_4h_to_h.weight")) return {TensorParallelSplit::columns, 1, hidden, ffn};
  return {TensorParallelSplit::replicated, 1, static_cast<std::int64_t>(spec.numel), 1};
}

std::vector<std::int64_t> whole_shape(const GptConfig& config, const ParamSpec& spec) {
  const TensorParallelSlice slice = tensor_parallel_slice(config, spec);
  if (slice.split == TensorParallelSplit::replicated) return spec.shape;
  if (spec.shape.size() == 1) return {slice.full_rows * slice.full_cols};
  return {slice.full_rows, slice.full_cols};
}

void scatter_slice(const GptConfig& config, const ParamSpec& spec, int rank, const void* slice, void* whole,
                   std::size_t element_size) {
  const TensorParallelSlice map = tensor_parallel_slice(config, spec);
  const auto* in = static_cast<const char*>(slice);
  auto* out = static_cast<char*>(whole);
  for (std::size_t i = 0; i < spec.numel; ++i) {
    std::memcpy(out + map.global_index(i, rank, config.tensor_parallel_size) * element_size, in + i * element_size,
                element_size);
  }
}

void gather_slice(const GptConfig& config, const ParamSpec& spec, int rank, const void* whole, void* slice,
                  std::size_t element_size) {
  const TensorParallelSlice map = tensor_parallel_slice(config, spec);
  const auto* in = static_cast<const char*>(whole);
  auto* out = static_cast<char*>(slice);
  for (std::size_t i = 0; i < spec.numel; ++i) {
    std::memcpy(out + i * element_size, in + map.global_index(i, rank, config.tensor_parallel_size) * element_size,
                element_size);
  }
}

GptParamIndex index_chunk_params(const ParamList& params, const ModelChunk& chunk) {
  GptParamIndex index{};
  const bool has_word_embedding = chunk.has_embedding || chunk.has_head;
  index.word_embedding = has_word_embedding ? params.index_of(kWordEmbeddingName) : kAbsentParam;
  index.position_embedding =
      chunk.has_embedding ? params.index_of("embedding.position_embeddings.weight") : kAbsentParam;
  index.final_ln_weight = chunk.has_head ? params.index_of("decoder.final_layernorm.weight") : kAbsentParam;
  index.final_ln_bias = chunk.has_head ? params.index_of("decoder.final_layernorm.bias") : kAbsentParam;
  for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
    auto at = [&](const char* suffix) { return params.index_of(layer_name(l, suffix)); };
    index.layers.push_back(
        {at("input_layernorm.weight"), at("input_layernorm.bias"), at("self_attention.query_key_value.weight"),
         at("self_attention.query_key_value.bias"), at("self_attention.dense.weight"), at("self_attention.dense.bias"),
         at("post_attention_layernorm.weight"), at("post_attention_layernorm.bias"), at("mlp.dense_h_to_4h.weight"),
         at("mlp.dense_h_to_4h.bias"), at("mlp.dense_4h_to_h.weight"), at("mlp.dense_4h_to_h.bias")});
  }
  return index;
}

GptParamIndex index_params(const GptConfig& config, const ParamList& params) {
  return index_chunk_params(params, whole_chunk(config));
}

std::int64_t whole_model_parameters(const GptConfig& config) {
  return static_cast<std::int64_t>(build_param_list(config.whole_model()).total_numel);
}

double model_flops_per_token(const GptConfig& config) {
  return 6.0 * static_cast<double>(whole_model_parameters(config)) +
         12.0 * config.num_layers * static_cast<double>(config.seq_length) * config.hidden_size;
}

}  // namespace adamant::model
