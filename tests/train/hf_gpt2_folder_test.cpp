// Hugging Face GPT-2 folders: the layout of what export writes (checked element by element
// against the Adamant parameters), export -> import -> export byte for byte, and the errors
// for folders Adamant cannot run.
#include "adamant/train/hf_gpt2_folder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <string_view>

#include "adamant/core/archive.h"
#include "adamant/core/error.h"
#include "adamant/core/safetensors.h"
#include "adamant/model/param_layout.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/train_config.h"
#include "support/test_data.h"

namespace adamant::train {
namespace {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TrainConfig small_config(bool openai_gelu) {
  TrainConfig c;
  c.model.num_layers = 2;
  c.model.hidden_size = 32;
  c.model.ffn_hidden_size = 96;  // not 4 x hidden: n_inner must carry it
  c.model.num_attention_heads = 4;
  c.model.seq_length = 8;
  c.model.max_position_embeddings = 8;
  c.model.openai_gelu = openai_gelu;
  c.optim.megatron_amp_O2 = false;
  c.data.tokenizer.vocab_file = testing::data_dir() / "gpt2" / "encoder.json";
  c.data.tokenizer.merge_file = testing::data_dir() / "gpt2" / "vocab.bpe";
  return c;
}

// A checkpoint of random weights (biases and layernorms included) for `config`.
std::vector<float> write_random_checkpoint(const fs::path& folder, const TrainConfig& config) {
  const model::GptConfig gpt = gpt_config_of(config, 50257);
  std::vector<float> weights(model::build_param_list(gpt).total_numel);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  for (float& w : weights) w = normal(rng);
  write_weights_checkpoint(folder, gpt, weights.data(), DType::f32, to_yaml(config));
  return weights;
}

std::vector<float> floats(const SafetensorsReader& reader, const std::string& name) {
  const auto bytes = reader.read(name);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Expects `load` to throw an Error whose message holds each of `parts`.
void expect_refused(const std::function<void()>& load, std::initializer_list<std::string_view> parts) {
  try {
    load();
    ADD_FAILURE() << "loaded: expected an error holding " << *parts.begin();
  } catch (const Error& e) {
    for (const std::string_view part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

void expect_same_folders(const fs::path& a, const fs::path& b) {
  for (const char* file : {kHfWeightsFile, kHfConfigFile, kHfVocabFile, kHfMergesFile}) {
    SCOPED_TRACE(file);
    const std::string bytes = file_bytes(a / file);
    EXPECT_FALSE(bytes.empty());
    EXPECT_TRUE(bytes == file_bytes(b / file));
  }
}

TEST(HfGpt2Export, WritesHuggingFaceNamesAndLayouts) {
  const auto dir = testing::temp_dir("hf_export_layout");
  const TrainConfig config = small_config(true);
  const std::vector<float> w = write_random_checkpoint(dir / "ckpt", config);
  export_hf_gpt2(dir / "ckpt", dir / "hf", std::nullopt);
  const model::GptConfig gpt = gpt_config_of(config, 50257);
  const ParamList params = model::build_param_list(gpt);
  const SafetensorsReader hf(dir / "hf" / kHfWeightsFile);
  EXPECT_EQ(hf.entries().size(), 2u + 12u * 2u + 2u);
  EXPECT_EQ(hf.find("lm_head.weight"), nullptr);  // tied
  EXPECT_EQ(hf.metadata().at("format"), "pt");
  auto param = [&](const std::string& name) { return w.data() + params[params.index_of(name)].offset; };

  // Embeddings: the vocabulary cut back to the tokenizer's 50257 rows of the padded 50304.
  EXPECT_EQ(hf.entry("transformer.wte.weight").shape, (std::vector<std::int64_t>{50257, 32}));
  const auto wte = floats(hf, "transformer.wte.weight");
  EXPECT_EQ(0, std::memcmp(wte.data(), param("embedding.word_embeddings.weight"), wte.size() * 4));
  EXPECT_EQ(hf.entry("transformer.wpe.weight").shape, (std::vector<std::int64_t>{8, 32}));
  // Conv1D [in, out]: c_attn[i][o] = query_key_value[o][i], columns q | k | v as in the fused rows.
  EXPECT_EQ(hf.entry("transformer.h.1.attn.c_attn.weight").shape, (std::vector<std::int64_t>{32, 96}));
  const auto c_attn = floats(hf, "transformer.h.1.attn.c_attn.weight");
  const float* qkv = param("decoder.layers.1.self_attention.query_key_value.weight");
  for (int o : {0, 31, 32, 70, 95}) {
    for (int i : {0, 5, 31}) EXPECT_EQ(c_attn[static_cast<std::size_t>(i * 96 + o)], qkv[o * 32 + i]);
  }
  const auto c_fc = floats(hf, "transformer.h.0.mlp.c_fc.weight");  // [32, 96] from [96, 32]
  EXPECT_EQ(c_fc[5 * 96 + 17], param("decoder.layers.0.mlp.dense_h_to_4h.weight")[17 * 32 + 5]);
  const auto proj = floats(hf, "transformer.h.0.mlp.c_proj.weight");  // [96, 32] from [32, 96]
  EXPECT_EQ(proj[17 * 32 + 5], param("decoder.layers.0.mlp.dense_4h_to_h.weight")[5 * 96 + 17]);
  const auto attn_proj = floats(hf, "transformer.h.1.attn.c_proj.weight");
  EXPECT_EQ(attn_proj[3 * 32 + 7], param("decoder.layers.1.self_attention.dense.weight")[7 * 32 + 3]);
  EXPECT_EQ(floats(hf, "transformer.h.1.ln_2.bias")[4], param("decoder.layers.1.post_attention_layernorm.bias")[4]);
  EXPECT_EQ(floats(hf, "transformer.ln_f.weight")[9], param("decoder.final_layernorm.weight")[9]);

  const std::string config_json = file_bytes(dir / "hf" / kHfConfigFile);
  for (const char* field : {"\"activation_function\": \"gelu_new\"", "\"n_inner\": 96", "\"n_positions\": 8",
                            "\"vocab_size\": 50257", "\"layer_norm_epsilon\": 1e-05", "\"model_type\": \"gpt2\""}) {
    EXPECT_NE(config_json.find(field), std::string::npos) << field << " in " << config_json;
  }
  EXPECT_EQ(file_bytes(dir / "hf" / kHfVocabFile), file_bytes(testing::data_dir() / "gpt2" / "encoder.json"));
}

TEST(HfGpt2Export, ExportImportExportIsByteIdenticalInFp32AndBf16) {
  const auto dir = testing::temp_dir("hf_round_trip");
  const TrainConfig config = small_config(false);
  const std::vector<float> w = write_random_checkpoint(dir / "ckpt", config);
  for (const DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::string tag(dtype_name(dtype));
    export_hf_gpt2(dir / "ckpt", dir / ("first_" + tag), dtype);
    import_hf_gpt2(dir / ("first_" + tag), dir / ("imported_" + tag));
    export_hf_gpt2(dir / ("imported_" + tag), dir / ("second_" + tag), std::nullopt);
    expect_same_folders(dir / ("first_" + tag), dir / ("second_" + tag));
  }
  // The imported fp32 checkpoint holds the weights themselves; its padded rows are the mean row.
  const model::GptConfig gpt = gpt_config_of(config, 50257);
  model::GptModel imported(gpt, DType::f32, 1, Device::cpu(), 99);
  load_checkpoint(dir / "imported_fp32", imported, nullptr);
  const ParamList& params = imported.params();
  const auto* got = static_cast<const float*>(imported.weights().data);
  const std::size_t wte = params[params.index_of("embedding.word_embeddings.weight")].offset;
  for (std::size_t i = 0; i < params.total_numel; ++i) {
    if (i >= wte + 50257 * 32 && i < wte + 50304 * 32) continue;
    ASSERT_EQ(got[i], w[i]) << "element " << i;
  }
  for (std::size_t c : {0u, 31u}) {
    double mean = 0;
    for (std::size_t r = 0; r < 50257; ++r) mean += w[wte + r * 32 + c];
    mean /= 50257;
    EXPECT_NEAR(got[wte + 50300 * 32 + c], mean, 1e-7);
  }
}

TEST(HfGpt2Restore, LoadsIntoShorterSequencesAndRefusesAnotherModel) {
  const auto dir = testing::temp_dir("hf_restore");
  TrainConfig config = small_config(true);
  const std::vector<float> w = write_random_checkpoint(dir / "ckpt", config);
  export_hf_gpt2(dir / "ckpt", dir / "hf", std::nullopt);
  const ParamList whole = model::build_param_list(gpt_config_of(config, 50257));

  config.model.seq_length = 4;  // of the folder's 8 positions
  config.model.max_position_embeddings = 4;
  model::GptModel model(gpt_config_of(config, 50257), DType::f32, 1, Device::cpu(), 5);
  load_pretrained_weights(dir / "hf", model);
  const auto* got = static_cast<const float*>(model.weights().data);
  for (const char* name : {"embedding.position_embeddings.weight", "decoder.layers.1.self_attention.dense.weight",
                           "decoder.final_layernorm.bias"}) {
    const ParamSpec& mine = model.params()[model.params().index_of(name)];
    const ParamSpec& theirs = whole[whole.index_of(name)];
    for (std::size_t i = 0; i < mine.numel; ++i) ASSERT_EQ(got[mine.offset + i], w[theirs.offset + i]) << name;
  }

  config.model.openai_gelu = false;
  model::GptModel exact(gpt_config_of(config, 50257), DType::f32, 1, Device::cpu(), 5);
  expect_refused([&] { load_pretrained_weights(dir / "hf", exact); },
                 {"were trained with GELU's tanh approximation (activation_function gelu_new) but this config "
                  "computes the exact (erf) GELU; set model.openai_gelu=true"});
  // NeMo's fused bias-GELU computes the tanh approximation: the same weights load under it.
  config.model.bias_activation_fusion = true;
  model::GptModel fused(gpt_config_of(config, 50257), DType::f32, 1, Device::cpu(), 5);
  load_pretrained_weights(dir / "hf", fused);
}

// Rewrites dir/model.safetensors with `edit` applied to the list of (name, shape, bytes).
struct Tensor3 {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};
void rewrite(const fs::path& folder, const std::function<void(std::vector<Tensor3>&)>& edit) {
  std::vector<Tensor3> tensors;
  {
    const SafetensorsReader reader(folder / kHfWeightsFile);
    for (const auto& e : reader.entries()) tensors.push_back({e.name, e.dtype, e.shape, reader.read(e.name)});
  }
  edit(tensors);
  SafetensorsWriter writer;
  for (const auto& t : tensors) writer.add(t.name, t.bytes.data(), t.dtype, t.shape);
  writer.write(folder / kHfWeightsFile);
}

void expect_import_error(const fs::path& folder, const std::vector<std::string>& words) {
  try {
    import_hf_gpt2(folder, folder.string() + "_imported");
    ADD_FAILURE() << "imported " << folder;
  } catch (const Error& e) {
    for (const auto& word : words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

// A checkpoint's weights meet only the GELU they were trained with: its header records the form
// (one written before the record by its stored config's model.openai_gelu, all those versions
// honoured), and a config computing the other form is refused, naming the keys that fix it.
TEST(CheckpointGelu, WeightsLoadOnlyUnderTheGeluTheyWereTrainedWith) {
  const auto dir = testing::temp_dir("checkpoint_gelu");
  const TrainConfig tanh_config = small_config(true);
  const std::vector<float> w = write_random_checkpoint(dir / "new", tanh_config);
  // The same checkpoint as an earlier version wrote it: no GELU in the header.
  {
    ArchiveReader reader(dir / "new" / "model.adm");
    fs::create_directories(dir / "old");
    ArchiveWriter writer(dir / "old" / "model.adm");
    for (const ArchiveEntry& e : reader.entries()) {
      writer.add(e.name, reader.read_all(e.name).data(), e.dtype, e.shape);
    }
    writer.meta() = reader.meta();
    ASSERT_EQ(writer.meta().erase("gelu"), 1u);
    writer.commit();
  }
  for (const char* folder : {"new", "old"}) {
    SCOPED_TRACE(folder);
    TrainConfig exact_config = tanh_config;
    exact_config.model.openai_gelu = false;
    model::GptModel exact(gpt_config_of(exact_config, 50257), DType::f32, 1, Device::cpu(), 5);
    expect_refused([&] { load_checkpoint(dir / folder, exact, nullptr); },
                   {"was trained with GELU's tanh approximation but this config computes the exact (erf) GELU",
                    "set model.openai_gelu=true"});
    // NeMo's fused bias-GELU (bias_activation_fusion) computes the tanh form: they load.
    exact_config.model.bias_activation_fusion = true;
    model::GptModel fused(gpt_config_of(exact_config, 50257), DType::f32, 1, Device::cpu(), 5);
    load_checkpoint(dir / folder, fused, nullptr);
    const auto* got = static_cast<const float*>(fused.weights().data);
    EXPECT_TRUE(std::equal(w.begin(), w.end(), got));
  }
  // And the other way: exact weights under a fused bias-GELU config.
  TrainConfig exact_config = tanh_config;
  exact_config.model.openai_gelu = false;
  write_random_checkpoint(dir / "exact", exact_config);
  exact_config.model.bias_activation_fusion = true;
  model::GptModel fused(gpt_config_of(exact_config, 50257), DType::f32, 1, Device::cpu(), 5);
  expect_refused([&] { load_checkpoint(dir / "exact", fused, nullptr); },
                 {"was trained with the exact (erf) GELU but this config computes GELU's tanh approximation",
                  "set model.openai_gelu=false and model.bias_activation_fusion=false"});
}

TEST(HfGpt2Import, RefusesFoldersItCannotRunNamingTheTensorOrField) {
  const auto dir = testing::temp_dir("hf_import_errors");
  write_random_checkpoint(dir / "ckpt", small_config(false));
  export_hf_gpt2(dir / "ckpt", dir / "good", std::nullopt);
  auto variant = [&](const std::string& name) {
    fs::copy(dir / "good", dir / name, fs::copy_options::recursive);
    return dir / name;
  };
  auto edit_config = [&](const fs::path& folder, const std::string& from, const std::string& to) {
    std::string text = file_bytes(folder / kHfConfigFile);
    ASSERT_NE(text.find(from), std::string::npos);
    text.replace(text.find(from), from.size(), to);
    std::ofstream(folder / kHfConfigFile, std::ios::trunc) << text;
  };
  EXPECT_NO_THROW(import_hf_gpt2(dir / "good", dir / "good_imported"));
  // Hugging Face's own naming variants: no "transformer." prefix, the mask buffers, a tied lm_head copy.
  const auto original_names = variant("original_names");
  rewrite(original_names, [](std::vector<Tensor3>& t) {
    for (auto& x : t) x.name = x.name.substr(std::string("transformer.").size());
    t.push_back({"lm_head.weight", t[0].dtype, t[0].shape, t[0].bytes});
    t.push_back({"h.0.attn.bias", DType::f32, {1, 1, 2, 2}, std::vector<std::uint8_t>(16)});
  });
  EXPECT_NO_THROW(import_hf_gpt2(original_names, dir / "original_imported"));
  export_hf_gpt2(dir / "good_imported", dir / "good_exported", std::nullopt);
  export_hf_gpt2(dir / "original_imported", dir / "original_exported", std::nullopt);
  expect_same_folders(dir / "good_exported", dir / "original_exported");

  const auto missing = variant("missing");
  rewrite(missing, [](std::vector<Tensor3>& t) {
    std::erase_if(t, [](const Tensor3& x) { return x.name == "transformer.h.1.mlp.c_fc.bias"; });
  });
  expect_import_error(missing, {"transformer.h.1.mlp.c_fc.bias", "missing"});

  const auto shape = variant("shape");
  rewrite(shape, [](std::vector<Tensor3>& t) {
    for (auto& x : t) {
      if (x.name == "transformer.h.0.attn.c_attn.weight") x.shape = {96, 32};  // Megatron's layout, not Conv1D's
    }
  });
  expect_import_error(shape, {"transformer.h.0.attn.c_attn.weight", "[96,32]", "[32,96]"});

  const auto extra = variant("extra");
  rewrite(extra, [](std::vector<Tensor3>& t) {
    t.push_back({"transformer.h.2.ln_1.weight", DType::f32, {32}, std::vector<std::uint8_t>(128)});
  });
  expect_import_error(extra, {"unexpected tensor", "transformer.h.2.ln_1.weight"});

  const auto untied = variant("untied");
  rewrite(untied, [](std::vector<Tensor3>& t) {
    t.push_back({"lm_head.weight", t[0].dtype, t[0].shape, std::vector<std::uint8_t>(t[0].bytes.size())});
  });
  expect_import_error(untied, {"lm_head.weight"});

  const auto mixed = variant("mixed");
  rewrite(mixed, [](std::vector<Tensor3>& t) {
    for (auto& x : t) {
      if (x.name == "transformer.ln_f.bias") {
        x.dtype = DType::bf16;
        x.bytes.resize(x.bytes.size() / 2);
      }
    }
  });
  expect_import_error(mixed, {"transformer.ln_f.bias", "BF16"});

  struct ConfigEdit {
    const char* name;
    const char* from;
    const char* to;
    std::vector<std::string> words;
  };
  for (const ConfigEdit& edit : std::vector<ConfigEdit>{
           {"llama", "\"model_type\": \"gpt2\"", "\"model_type\": \"llama\"", {"model_type", "llama"}},
           {"relu",
            "\"activation_function\": \"gelu\"",
            "\"activation_function\": \"relu\"",
            {"activation_function", "relu"}},
           {"heads", "\"n_head\": 4", "\"n_head\": 5", {"config.json", "num_attention_heads"}},
           {"layers", "\"n_layer\": 2", "\"n_layer\": 3", {"transformer.h.2.", "missing"}},
       }) {
    const auto folder = variant(edit.name);
    edit_config(folder, edit.from, edit.to);
    expect_import_error(folder, edit.words);
  }

  const auto truncated = variant("truncated");
  fs::resize_file(truncated / kHfWeightsFile, fs::file_size(truncated / kHfWeightsFile) - 100);
  expect_import_error(truncated, {"transformer.ln_f.bias", "truncated"});
  const auto header = variant("header");
  {
    std::fstream f(header / kHfWeightsFile, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.write("[[[[", 4);
  }
  expect_import_error(header, {"bad header"});
  const auto no_weights = variant("no_weights");
  fs::remove(no_weights / kHfWeightsFile);
  expect_import_error(no_weights, {"model.safetensors"});
}

}  // namespace
}  // namespace adamant::train
