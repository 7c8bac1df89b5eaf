#include "adamant/train/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "adamant/core/archive.h"
#include "adamant/core/error.h"
#include "adamant/kernels/elementwise.h"

namespace adamant::train {

namespace {

constexpr int kFormatVersion = 1;
constexpr const char* kModelFile = "model.adm";
constexpr const char* kLatestFile = "latest";

nlohmann::json architecture_of(const model::GptConfig& c) {
  return {{"num_layers", c.num_layers},
          {"hidden_size", c.hidden_size},
          {"num_attention_heads", c.num_attention_heads},
          {"ffn_hidden_size", c.ffn_hidden_size},
          {"seq_length", c.seq_length},
          {"vocab_size", c.vocab_size},
          {"padded_vocab_size", c.padded_vocab_size()}};
}

std::vector<std::filesystem::path> complete_checkpoints(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step_", 0) == 0 && name.find('.') == std::string::npos &&
        std::filesystem::exists(entry.path() / kModelFile)) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort by step
  return out;
}

// The model's weights as a host tensor: the buffer itself on the CPU, else a copy in
// `staging` once the compute stream is done (checkpoints are not part of a step).
Tensor host_weights(model::GptModel& model, std::vector<std::uint8_t>& staging) {
  const Tensor weights = model.weights();
  if (weights.device.is_cpu()) return weights;
  staging.resize(weights.bytes());
  model.stream().synchronize();
  copy_bytes(staging.data(), Device::cpu(), weights.data, weights.device, weights.bytes());
  return Tensor::flat(staging.data(), weights.dtype, Device::cpu(), weights.numel());
}

void write_text_atomically(const std::filesystem::path& file, const std::string& text) {
  auto temp = file;
  temp += ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    ADAMANT_CHECK(out.good(), "cannot write {}", temp.string());
  }
  std::filesystem::rename(temp, file);
}

}  // namespace

CheckpointStore::CheckpointStore(std::filesystem::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {}

std::optional<std::filesystem::path> CheckpointStore::latest() const {
  const auto all = complete_checkpoints(dir_);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::filesystem::path CheckpointStore::save(const TrainingPosition& position, model::GptModel& model,
                                            const optim::Optimizer& optimizer, const std::string& config_yaml,
                                            comm::Communicator& world) const {
  const std::string name = fmt::format("step_{:08}", position.step);
  const auto final_dir = dir_ / name;
  const auto partial_dir = dir_ / (name + ".partial");
  if (world.rank() == 0) {
    std::filesystem::remove_all(partial_dir);
    std::filesystem::create_directories(partial_dir);
  }
  world.barrier();

  optimizer.save(partial_dir);
  if (world.rank() == 0) {
    ArchiveWriter writer(partial_dir / kModelFile);
    const ParamList& params = model.params();
    // optimizer.save() ended with a barrier on its communicator, so no parameter all-gather is pending.
    std::vector<std::uint8_t> staging;
    const Tensor weights = host_weights(model, staging);
    nlohmann::json names = nlohmann::json::array();
    for (const ParamSpec& p : params.params) {
      writer.add(p.name, weights.slice(p.offset, p.numel).data, weights.dtype, p.shape);
      names.push_back(p.name);
    }
    auto& meta = writer.meta();
    meta["format"] = kFormatVersion;
    meta["kind"] = "adamant-gpt-checkpoint";
    meta["step"] = position.step;
    meta["consumed_samples"] = position.consumed_samples;
    meta["architecture"] = architecture_of(model.config());
    meta["weight_dtype"] = std::string(dtype_name(weights.dtype));
    meta["params"] = names;
    meta["config_yaml"] = config_yaml;
    writer.commit();
  }
  world.barrier();  // every rank's optimizer shard is on disk
  if (world.rank() == 0) {
    std::filesystem::remove_all(final_dir);
    std::filesystem::rename(partial_dir, final_dir);
    write_text_atomically(dir_ / kLatestFile, name + "\n");
    if (keep_ > 0) {
      auto all = complete_checkpoints(dir_);
      while (all.size() > static_cast<std::size_t>(keep_)) {
        std::filesystem::remove_all(all.front());
        all.erase(all.begin());
      }
    }
  }
  world.barrier();
  return final_dir;
}

TrainingPosition load_checkpoint(const std::filesystem::path& checkpoint, model::GptModel& model,
                                 optim::Optimizer* optimizer) {
  ADAMANT_CHECK(
      std::filesystem::is_directory(checkpoint),
      "checkpoint {} does not exist or is not a folder; pass a folder such as runs/<name>/checkpoints/step_00000100",
      checkpoint.string());
  ArchiveReader reader(checkpoint / kModelFile);
  const auto& meta = reader.meta();
  ADAMANT_CHECK(meta.value("kind", "") == "adamant-gpt-checkpoint", "{} is not an Adamant GPT checkpoint",
                reader.path().string());
  ADAMANT_CHECK(meta.value("format", 0) == kFormatVersion, "checkpoint {} has format {}, this Adamant reads format {}",
                reader.path().string(), meta.value("format", 0), kFormatVersion);
  const nlohmann::json expected = architecture_of(model.config());
  const nlohmann::json& stored = meta.at("architecture");
  for (const auto& [key, value] : expected.items()) {
    if (!stored.contains(key) || stored[key] != value) {
      const std::string hint = (key == "vocab_size" || key == "padded_vocab_size")
                                   ? "the checkpoint was trained with another tokenizer vocabulary; use the same "
                                     "model.tokenizer files and model.make_vocab_size_divisible_by"
                                   : "use the configuration the checkpoint was trained with, or start a new run "
                                     "(another exp_manager.name)";
      fail("checkpoint {} was written for another model: {} is {} there but {} here; {}", checkpoint.string(), key,
           stored.contains(key) ? stored[key].dump() : "absent", value.dump(), hint);
    }
  }
  const ParamList& params = model.params();
  const Tensor model_weights = model.weights();
  std::vector<std::uint8_t> staging;  // GPU weights: filled on the host, uploaded once below
  const Tensor weights = host_weights(model, staging);
  for (const ParamSpec& p : params.params) {
    const ArchiveEntry& e = reader.entry(p.name);
    ADAMANT_CHECK(e.shape == p.shape,
                  "checkpoint {}: parameter {} has another shape there; it was written for another model",
                  checkpoint.string(), p.name);
    Tensor dst = weights.slice(p.offset, p.numel);
    if (e.dtype == weights.dtype) {
      reader.read(p.name, dst.data, dst.bytes());
    } else {  // e.g. generate in fp32 from bf16 training weights
      std::vector<std::uint8_t> raw = reader.read_all(p.name);
      Tensor src = Tensor::flat(raw.data(), e.dtype, Device::cpu(), p.numel);
      kernels::cast(src, dst, Stream());
    }
  }
  if (model_weights.device.is_cuda()) {
    copy_bytes(model_weights.data, model_weights.device, weights.data, Device::cpu(), weights.bytes());
  }
  if (optimizer != nullptr) optimizer->load(checkpoint);
  return {meta.at("step").get<std::int64_t>(), meta.at("consumed_samples").get<std::int64_t>()};
}

std::string checkpoint_config_yaml(const std::filesystem::path& checkpoint) {
  ArchiveReader reader(checkpoint / kModelFile);
  return reader.meta().value("config_yaml", "");
}

}  // namespace adamant::train
