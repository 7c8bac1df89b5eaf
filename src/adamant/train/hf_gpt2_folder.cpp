#include "adamant/train/hf_gpt2_folder.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "adamant/core/archive.h"
#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"
#include "adamant/core/file_read.h"
#include "adamant/core/safetensors.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/model/hf_gpt2_layout.h"
#include "adamant/model/param_layout.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

namespace {

using nlohmann::json;

const char* gelu_name(kernels::GeluForm form) { return form == kernels::GeluForm::tanh ? "gelu_new" : "gelu"; }

// A float written as its shortest decimal (1e-05, not 9.99999974737875e-06).
double decimal(float value) { return std::stod(fmt::format("{}", value)); }

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    default:
      return "float32";
  }
}

json hf_config_json(const model::GptConfig& c, DType dtype) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.seq_length},
          {"n_embd", c.hidden_size},
          {"n_layer", c.num_layers},
          {"n_head", c.num_attention_heads},
          {"n_inner", c.ffn_hidden_size},
          {"activation_function", gelu_name(c.gelu())},
          {"layer_norm_epsilon", decimal(c.layernorm_epsilon)},
          {"initializer_range", decimal(c.init_method_std)},
          {"resid_pdrop", decimal(c.hidden_dropout)},
          {"embd_pdrop", decimal(c.hidden_dropout)},
          {"attn_pdrop", decimal(c.attention_dropout)},
          {"tie_word_embeddings", true},
          {"scale_attn_weights", true},
          {"bos_token_id", data::BpeTokenizer::kEndOfText},
          {"eos_token_id", data::BpeTokenizer::kEndOfText},
          {"torch_dtype", torch_dtype_name(dtype)}};
}

// The whole model's flat weights (laid out by build_param_list(config)) in the file's dtype.
struct WholeWeights {
  std::vector<std::uint8_t> bytes;
  DType dtype = DType::f32;
};

// Buffers of the original GPT-2 files that are not parameters (the causal mask).
bool is_attention_buffer(const std::string& name) {
  return name.ends_with(".attn.masked_bias") || name.ends_with(".attn.bias");  // not "attn.c_attn.bias"
}

// The padded vocabulary rows become the mean of the real rows (see the header).
void fill_padded_rows(const model::GptConfig& config, const ParamSpec& word_embedding, WholeWeights& weights) {
  const auto hidden = static_cast<std::size_t>(config.hidden_size);
  const auto real = static_cast<std::size_t>(config.vocab_size);
  const auto padded = static_cast<std::size_t>(config.padded_vocab_size());
  if (padded == real) return;
  const std::size_t element = dtype_size(weights.dtype);
  std::uint8_t* base = weights.bytes.data() + word_embedding.offset * element;
  std::vector<float> rows(real * hidden);  // the cast kernels go through fp32
  kernels::cast(Tensor::flat(base, weights.dtype, Device::cpu(), rows.size()),
                Tensor::flat(rows.data(), DType::f32, Device::cpu(), rows.size()), Stream());
  std::vector<double> sum(hidden, 0.0);
  for (std::size_t r = 0; r < real; ++r) {
    for (std::size_t c = 0; c < hidden; ++c) sum[c] += rows[r * hidden + c];
  }
  std::vector<float> mean(hidden);
  for (std::size_t c = 0; c < hidden; ++c) mean[c] = static_cast<float>(sum[c] / static_cast<double>(real));
  for (std::size_t r = real; r < padded; ++r) {
    kernels::cast(Tensor::flat(mean.data(), DType::f32, Device::cpu(), hidden),
                  Tensor::flat(base + r * hidden * element, weights.dtype, Device::cpu(), hidden), Stream());
  }
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return json(shape).dump(); }

// Reads dir/model.safetensors into the whole model `config`; the file has `positions` (config.json's
// n_positions >= config.seq_length) position embeddings, of which the first config.seq_length are used.
WholeWeights read_hf_gpt2_weights(const std::filesystem::path& dir, const model::GptConfig& config, int positions) {
  const auto file = dir / kHfWeightsFile;
  ADAMANT_CHECK(std::filesystem::exists(file), "{} has no {}; a Hugging Face GPT-2 folder holds {} and {}",
                dir.string(), kHfWeightsFile, kHfWeightsFile, kHfConfigFile);
  const SafetensorsReader reader(file);
  const ParamList params = model::build_param_list(config);
  const std::vector<model::HfTensor> tensors = model::hf_gpt2_tensors(config, params);
  std::map<std::string, const SafetensorsEntry*> by_name;  // names without the "transformer." prefix too
  const SafetensorsEntry* lm_head = nullptr;
  for (const SafetensorsEntry& e : reader.entries()) {
    if (e.name == "lm_head.weight") {
      lm_head = &e;
      continue;
    }
    if (is_attention_buffer(e.name)) continue;
    const std::string name = e.name.starts_with("transformer.") ? e.name : "transformer." + e.name;
    ADAMANT_CHECK(by_name.emplace(name, &e).second, "{}: tensor '{}' appears twice (with and without 'transformer.')",
                  file.string(), name);
  }
  WholeWeights out;
  bool first = true;
  for (const model::HfTensor& t : tensors) {
    const auto found = by_name.find(t.name);
    ADAMANT_CHECK(found != by_name.end(), "{}: tensor '{}' is missing; the folder is not a complete GPT-2 of {} layers",
                  file.string(), t.name, config.num_layers);
    const SafetensorsEntry& e = *found->second;
    if (first) {
      out.dtype = e.dtype;
      ADAMANT_CHECK(e.dtype == DType::f32 || e.dtype == DType::bf16 || e.dtype == DType::f16,
                    "{}: tensor '{}' is {}; Adamant reads F32, BF16 or F16 weights", file.string(), e.name,
                    safetensors_dtype_name(e.dtype));
      out.bytes.assign(params.total_numel * dtype_size(out.dtype), 0);
      first = false;
    }
    ADAMANT_CHECK(e.dtype == out.dtype, "{}: tensor '{}' is {} but the others are {}; all weights need one dtype",
                  file.string(), e.name, safetensors_dtype_name(e.dtype), safetensors_dtype_name(out.dtype));
    std::vector<std::int64_t> expected = t.shape;
    if (t.name == "transformer.wpe.weight") expected[0] = positions;
    ADAMANT_CHECK(e.shape == expected, "{}: tensor '{}' has shape {}, expected {} for the sizes in {}", file.string(),
                  e.name, shape_text(e.shape), shape_text(expected), kHfConfigFile);
    found->second = nullptr;  // used
    const std::vector<std::uint8_t> raw = reader.read(e.name);
    const ParamSpec& spec = params[t.param];
    model::from_hf_layout(t, spec, raw.data(), out.bytes.data() + spec.offset * dtype_size(out.dtype),
                          dtype_size(out.dtype));
  }
  for (const auto& unused : by_name) {
    ADAMANT_CHECK(unused.second == nullptr, "{}: unexpected tensor '{}'; a GPT-2 of {} layers has no such parameter",
                  file.string(), unused.second->name, config.num_layers);
  }
  if (lm_head != nullptr) {  // allowed only as the tied copy of the word embedding
    const SafetensorsEntry* wte = reader.find("transformer.wte.weight");
    const auto wte_bytes = reader.read(wte != nullptr ? wte->name : std::string("wte.weight"));
    ADAMANT_CHECK(lm_head->dtype == out.dtype && reader.read(lm_head->name) == wte_bytes,
                  "{}: lm_head.weight differs from transformer.wte.weight; Adamant's GPT ties the output layer to "
                  "the word embedding",
                  file.string());
  }
  fill_padded_rows(config, params[params.index_of("embedding.word_embeddings.weight")], out);
  return out;
}

// What the imported checkpoint's config.yaml says: the folder's sizes and tokenizer.
TrainConfig config_of_import(const model::GptConfig& g, DType dtype, const std::filesystem::path& checkpoint) {
  TrainConfig c;
  c.model = g;
  c.model.vocab_size = 0;  // the tokenizer's, not a key
  c.model.max_position_embeddings = g.seq_length;
  const auto folder = std::filesystem::absolute(checkpoint).lexically_normal();
  c.data.tokenizer.vocab_file = folder / kHfVocabFile;
  c.data.tokenizer.merge_file = folder / kHfMergesFile;
  c.optim.megatron_amp_O2 = dtype != DType::f32;
  c.trainer.precision = dtype == DType::f32 ? DType::bf16 : dtype;
  return c;
}

void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to, const char* what) {
  write_file_atomically(to, read_text_file(from, what), what);
}

}  // namespace

model::GptConfig read_hf_gpt2_config(const std::filesystem::path& dir) {
  const auto file = dir / kHfConfigFile;
  ADAMANT_CHECK(std::filesystem::is_directory(dir), "{} is not a folder; pass a Hugging Face GPT-2 folder",
                dir.string());
  ADAMANT_CHECK(std::filesystem::exists(file), "{} has no {}; a Hugging Face GPT-2 folder holds {} and {}",
                dir.string(), kHfConfigFile, kHfConfigFile, kHfWeightsFile);
  const json j = json::parse(read_text_file(file, "config file"), nullptr, false);
  ADAMANT_CHECK(!j.is_discarded() && j.is_object(), "{} is not a JSON object", file.string());
  auto bad = [&](const char* key, const std::string& why) -> void {
    fail("{}: '{}' is {}; {}", file.string(), key, j.contains(key) ? j[key].dump() : "absent", why);
  };
  if (j.value("model_type", std::string()) != "gpt2") bad("model_type", "Adamant imports only GPT-2 (\"gpt2\")");
  auto positive = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<std::int64_t>() <= 0 ||
        j[key].get<std::int64_t>() > (1 << 30)) {
      bad(key, "expected a positive integer");
    }
    return j[key].get<int>();
  };
  model::GptConfig g;
  g.num_layers = positive("n_layer");
  g.hidden_size = positive("n_embd");
  g.num_attention_heads = positive("n_head");
  g.seq_length = positive("n_positions");
  g.max_position_embeddings = g.seq_length;
  g.vocab_size = positive("vocab_size");
  g.ffn_hidden_size = (!j.contains("n_inner") || j["n_inner"].is_null()) ? 4 * g.hidden_size : positive("n_inner");
  const std::string activation = j.value("activation_function", std::string("gelu_new"));
  if (activation == "gelu") {
    g.openai_gelu = false;
  } else if (activation == "gelu_new" || activation == "gelu_pytorch_tanh" || activation == "gelu_fast") {
    g.openai_gelu = true;
  } else {
    bad("activation_function", "Adamant runs \"gelu\" (exact) and \"gelu_new\" (tanh approximation)");
  }
  const double epsilon = j.value("layer_norm_epsilon", 1e-5);
  if (std::abs(epsilon - 1e-5) > 1e-12) bad("layer_norm_epsilon", "Adamant's layernorm epsilon is 1e-5");
  if (!j.value("tie_word_embeddings", true)) bad("tie_word_embeddings", "Adamant ties the output layer (true)");
  if (!j.value("scale_attn_weights", true)) bad("scale_attn_weights", "Adamant scales attention by 1/sqrt(head_dim)");
  if (j.value("scale_attn_by_inverse_layer_idx", false)) {
    bad("scale_attn_by_inverse_layer_idx", "Adamant's attention scale is the same in every layer (false)");
  }
  if (j.value("add_cross_attention", false)) bad("add_cross_attention", "a GPT decoder has no cross-attention");
  g.init_method_std = static_cast<float>(j.value("initializer_range", 0.02));
  g.hidden_dropout = static_cast<float>(j.value("resid_pdrop", 0.1));
  g.attention_dropout = static_cast<float>(j.value("attn_pdrop", 0.1));
  try {
    g.validate();
  } catch (const Error& e) {
    fail("{}: these sizes are not a model Adamant can build: {}", file.string(), e.what());
  }
  return g;
}

void export_hf_gpt2(const std::filesystem::path& checkpoint, const std::filesystem::path& out,
                    std::optional<DType> dtype, const std::filesystem::path& vocab_dir) {
  const auto model_file = checkpoint / "model.adm";
  ADAMANT_CHECK(std::filesystem::exists(model_file),
                "{} is not a checkpoint folder (no model.adm); pass e.g. runs/<name>/checkpoints/step_00000100",
                checkpoint.string());
  const TrainConfig config = parse_train_config(checkpoint_config_yaml(checkpoint), {}, model_file.string());
  std::filesystem::path encoder = config.data.tokenizer.vocab_file, merges = config.data.tokenizer.merge_file;
  if (!vocab_dir.empty()) {
    encoder = vocab_dir / "encoder.json";
    merges = vocab_dir / "vocab.bpe";
  } else if (std::filesystem::exists(checkpoint / kHfVocabFile)) {
    encoder = checkpoint / kHfVocabFile;
    merges = checkpoint / kHfMergesFile;
  }
  const auto tokenizer = data::BpeTokenizer::load(encoder, merges);
  const model::GptConfig gpt = gpt_config_of(config, static_cast<int>(tokenizer.vocab_size())).whole_model();
  const DType out_dtype =
      dtype.value_or(parse_dtype(ArchiveReader(model_file).meta().value("weight_dtype", "fp32"), "weight_dtype"));
  ADAMANT_CHECK(out_dtype == DType::f32 || out_dtype == DType::bf16 || out_dtype == DType::f16,
                "--dtype {}: export writes fp32, bf16 or fp16", dtype_name(out_dtype));
  model::GptModel model(gpt, out_dtype, 1, Device::cpu(), 0);
  load_checkpoint(checkpoint, model, nullptr);

  const ParamList& params = model.params();
  const std::size_t element = dtype_size(out_dtype);
  const auto* weights = static_cast<const std::uint8_t*>(model.weights().data);
  std::vector<std::vector<std::uint8_t>> buffers;
  SafetensorsWriter writer;
  writer.metadata()["format"] = "pt";
  const std::vector<model::HfTensor> tensors = model::hf_gpt2_tensors(gpt, params);
  buffers.reserve(tensors.size());
  for (const model::HfTensor& t : tensors) {
    const ParamSpec& spec = params[t.param];
    std::size_t numel = 1;
    for (const std::int64_t d : t.shape) numel *= static_cast<std::size_t>(d);
    buffers.emplace_back(numel * element);
    model::to_hf_layout(t, spec, weights + spec.offset * element, buffers.back().data(), element);
    writer.add(t.name, buffers.back().data(), out_dtype, t.shape);
  }
  std::filesystem::create_directories(out);
  writer.write(out / kHfWeightsFile);
  write_file_atomically(out / kHfConfigFile, hf_config_json(gpt, out_dtype).dump(2) + "\n", "config file");
  copy_file_atomically(encoder, out / kHfVocabFile, "tokenizer file");
  copy_file_atomically(merges, out / kHfMergesFile, "tokenizer file");
}

void import_hf_gpt2(const std::filesystem::path& dir, const std::filesystem::path& checkpoint) {
  const model::GptConfig gpt = read_hf_gpt2_config(dir);
  for (const char* name : {kHfVocabFile, kHfMergesFile}) {
    ADAMANT_CHECK(std::filesystem::exists(dir / name),
                  "{} has no {}; a GPT-2 folder carries its tokenizer (vocab.json and merges.txt)", dir.string(), name);
  }
  const auto tokenizer = data::BpeTokenizer::load(dir / kHfVocabFile, dir / kHfMergesFile);
  ADAMANT_CHECK(tokenizer.vocab_size() == static_cast<std::size_t>(gpt.vocab_size),
                "{}: vocab_size is {} but {} holds {} tokens", (dir / kHfConfigFile).string(), gpt.vocab_size,
                (dir / kHfVocabFile).string(), tokenizer.vocab_size());
  const WholeWeights weights = read_hf_gpt2_weights(dir, gpt, gpt.seq_length);
  const TrainConfig config = config_of_import(gpt, weights.dtype, checkpoint);
  std::filesystem::create_directories(checkpoint);
  copy_file_atomically(dir / kHfVocabFile, checkpoint / kHfVocabFile, "tokenizer file");
  copy_file_atomically(dir / kHfMergesFile, checkpoint / kHfMergesFile, "tokenizer file");
  write_weights_checkpoint(checkpoint, gpt, weights.bytes.data(), weights.dtype, to_yaml(config));
}

void load_pretrained_weights(const std::filesystem::path& dir, model::GptModel& model) {
  if (std::filesystem::exists(dir / "model.adm")) {
    load_checkpoint(dir, model, nullptr);
    return;
  }
  const model::GptConfig file = read_hf_gpt2_config(dir);
  model::GptConfig whole = model.config().whole_model();
  auto same = [&](const char* key, long long here, const char* field, long long there) {
    ADAMANT_CHECK(here == there, "model.restore_from_path {}: {} is {} there but {} is {} here; set {}={}",
                  dir.string(), field, there, key, here, key, there);
  };
  same("model.num_layers", whole.num_layers, "n_layer", file.num_layers);
  same("model.hidden_size", whole.hidden_size, "n_embd", file.hidden_size);
  same("model.num_attention_heads", whole.num_attention_heads, "n_head", file.num_attention_heads);
  same("model.ffn_hidden_size", whole.ffn_hidden_size, "n_inner", file.ffn_hidden_size);
  ADAMANT_CHECK(whole.gelu() == file.gelu(),
                "model.restore_from_path {}: its weights were trained with {} (activation_function {}) but this config "
                "computes {}; {}",
                dir.string(), model::gelu_form_words(file.gelu()), gelu_name(file.gelu()),
                model::gelu_form_words(whole.gelu()), model::gelu_keys_for(file.gelu()));
  ADAMANT_CHECK(whole.vocab_size == file.vocab_size,
                "model.restore_from_path {}: its vocab_size is {} but model.tokenizer has {} tokens; use the "
                "folder's {} and {} as model.tokenizer.vocab_file and merge_file",
                dir.string(), file.vocab_size, whole.vocab_size, kHfVocabFile, kHfMergesFile);
  ADAMANT_CHECK(whole.seq_length <= file.seq_length,
                "model.restore_from_path {}: it has {} positions (n_positions) but model.encoder_seq_length is {}; "
                "set model.encoder_seq_length <= {}",
                dir.string(), file.seq_length, whole.seq_length, file.seq_length);
  const WholeWeights weights = read_hf_gpt2_weights(dir, whole, file.seq_length);

  // Into the model's dtype, then this rank's slice of each parameter.
  const Tensor model_weights = model.weights();
  const std::size_t element = dtype_size(model_weights.dtype);
  const ParamList whole_params = model::build_param_list(whole);
  std::vector<std::uint8_t> cast(whole_params.total_numel * element);
  kernels::cast(Tensor::flat(const_cast<std::uint8_t*>(weights.bytes.data()), weights.dtype, Device::cpu(),
                             whole_params.total_numel),
                Tensor::flat(cast.data(), model_weights.dtype, Device::cpu(), whole_params.total_numel), Stream());
  std::vector<std::uint8_t> staging(model_weights.device.is_cpu() ? 0 : model_weights.bytes(), 0);
  auto* host = model_weights.device.is_cpu() ? static_cast<std::uint8_t*>(model_weights.data) : staging.data();
  for (const ParamSpec& p : model.params().params) {
    const ParamSpec& w = whole_params[whole_params.index_of(p.name)];
    model::gather_slice(model.config(), p, model.tp_rank(), cast.data() + w.offset * element, host + p.offset * element,
                        element);
  }
  if (model_weights.device.is_cuda()) {
    model.stream().synchronize();
    copy_bytes(model_weights.data, model_weights.device, staging.data(), Device::cpu(), staging.size());
  }
}

}  // namespace adamant::train
