#include "adamant/model/hf_gpt2_layout.h"

#include <fmt/format.h>

#include <cstring>

#include "adamant/core/error.h"
#include "adamant/model/param_layout.h"

namespace adamant::model {

namespace {

// Copies a [rows, cols] matrix into its transpose [cols, rows] (element by element of element_size bytes).
void transpose(const char* in, char* out, std::int64_t rows, std::int64_t cols, std::size_t element_size) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      std::memcpy(out + static_cast<std::size_t>(c * rows + r) * element_size,
                  in + static_cast<std::size_t>(r * cols + c) * element_size, element_size);
    }
  }
}

std::size_t numel_of(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

}  // namespace

std::vector<HfTensor> hf_gpt2_tensors(const GptConfig& config, const ParamList& params) {
  ADAMANT_CHECK(config.tensor_parallel_size == 1, "the Hugging Face layout maps the whole model (tensor parallel 1)");
  const GptParamIndex index = index_params(config, params);
  std::vector<HfTensor> out;
  auto add = [&](std::string name, std::size_t param, bool transposed) {
    const ParamSpec& spec = params[param];
    HfTensor t;
    t.name = std::move(name);
    t.param = param;
    t.transposed = transposed;
    t.rows = spec.shape[0];
    t.shape = transposed ? std::vector<std::int64_t>{spec.shape[1], spec.shape[0]} : spec.shape;
    out.push_back(std::move(t));
  };
  add("transformer.wte.weight", index.word_embedding, false);
  out.back().rows = config.vocab_size;  // the padded rows stay out
  out.back().shape[0] = config.vocab_size;
  add("transformer.wpe.weight", index.position_embedding, false);
  for (int l = 0; l < config.num_layers; ++l) {
    const LayerParamIndex& w = index.layers[static_cast<std::size_t>(l)];
    const std::string h = fmt::format("transformer.h.{}.", l);
    add(h + "ln_1.weight", w.ln1_weight, false);
    add(h + "ln_1.bias", w.ln1_bias, false);
    add(h + "attn.c_attn.weight", w.qkv_weight, true);
    add(h + "attn.c_attn.bias", w.qkv_bias, false);
    add(h + "attn.c_proj.weight", w.proj_weight, true);
    add(h + "attn.c_proj.bias", w.proj_bias, false);
    add(h + "ln_2.weight", w.ln2_weight, false);
    add(h + "ln_2.bias", w.ln2_bias, false);
    add(h + "mlp.c_fc.weight", w.fc_weight, true);
    add(h + "mlp.c_fc.bias", w.fc_bias, false);
    add(h + "mlp.c_proj.weight", w.fc_proj_weight, true);
    add(h + "mlp.c_proj.bias", w.fc_proj_bias, false);
  }
  add("transformer.ln_f.weight", index.final_ln_weight, false);
  add("transformer.ln_f.bias", index.final_ln_bias, false);
  return out;
}

void to_hf_layout(const HfTensor& tensor, const ParamSpec& spec, const void* param, void* hf,
                  std::size_t element_size) {
  if (tensor.transposed) {
    transpose(static_cast<const char*>(param), static_cast<char*>(hf), spec.shape[0], spec.shape[1], element_size);
  } else {
    std::memcpy(hf, param, numel_of(tensor.shape) * element_size);  // a leading block of rows
  }
}

void from_hf_layout(const HfTensor& tensor, const ParamSpec& spec, const void* hf, void* param,
                    std::size_t element_size) {
  if (tensor.transposed) {
    transpose(static_cast<const char*>(hf), static_cast<char*>(param), spec.shape[1], spec.shape[0], element_size);
  } else {
    std::memcpy(param, hf, numel_of(tensor.shape) * element_size);
  }
}

}  // namespace adamant::model
