#include "adamant/train/checkpoint.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <vector>

#include "adamant/core/archive.h"
#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/model/param_layout.h"
#include "adamant/train/checkpoint_roles.h"

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

// The GELU a checkpoint's weights were trained with: recorded in its header; a checkpoint from
// before the record was written computed the form model.openai_gelu of its stored config chose.
kernels::GeluForm trained_gelu(const nlohmann::json& meta) {
  if (meta.contains("gelu")) {
    return meta["gelu"] == kernels::gelu_form_name(kernels::GeluForm::tanh) ? kernels::GeluForm::tanh
                                                                            : kernels::GeluForm::exact;
  }
  try {
    const YAML::Node openai_gelu = YAML::Load(meta.value("config_yaml", ""))["model"]["openai_gelu"];
    return openai_gelu && openai_gelu.as<bool>() ? kernels::GeluForm::tanh : kernels::GeluForm::exact;
  } catch (const YAML::Exception&) {
    return kernels::GeluForm::exact;  // no readable config: the default form of those versions
  }
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

// Each pipeline stage's and tensor-parallel rank's optimizer files live in a folder of their own.
std::filesystem::path optimizer_folder(int pp_rank, int pp_size, int tp_rank, int tp_size) {
  std::filesystem::path folder;
  if (pp_size > 1) folder /= fmt::format("pp_rank_{}", pp_rank);
  if (tp_size > 1) folder /= fmt::format("tp_rank_{}", tp_rank);
  return folder;
}

// How the slices of a run at tensor-parallel size `saved_tp` map onto this rank's of `config` (the padded
// vocabulary is the same: the checkpoint's architecture was checked).
optim::SplitRemap split_remap(const model::GptConfig& config, const ParamList& params, int saved_tp, int tp_rank) {
  model::GptConfig saved = config;
  saved.tensor_parallel_size = saved_tp;
  saved.sequence_parallel = false;
  ADAMANT_CHECK(config.padded_vocab_size() % saved_tp == 0,
                "a checkpoint saved at model.tensor_model_parallel_size={} cannot have the padded vocabulary {}",
                saved_tp, config.padded_vocab_size());
  saved.make_vocab_size_divisible_by = config.padded_vocab_size() / saved_tp;
  std::vector<std::pair<model::TensorParallelSlice, model::TensorParallelSlice>> slices;  // saved, this rank's
  for (const ParamSpec& spec : params.params) {
    slices.emplace_back(model::tensor_parallel_slice(saved, spec), model::tensor_parallel_slice(config, spec));
  }
  const int tp = config.tensor_parallel_size;
  return [slices = std::move(slices), saved_tp, tp, tp_rank](std::size_t param, int split_rank,
                                                             std::size_t element) -> std::optional<std::size_t> {
    const auto& [from, to] = slices[param];
    if (from.split == model::TensorParallelSplit::replicated) {  // every saved rank holds it: take rank 0's
      return split_rank == 0 ? std::optional<std::size_t>(element) : std::nullopt;
    }
    const auto [owner, local] = to.locate(from.global_index(element, split_rank, saved_tp), tp);
    return owner == tp_rank ? std::optional<std::size_t>(local) : std::nullopt;
  };
}

bool is_complete_checkpoint(const std::filesystem::path& folder) {
  const std::string name = folder.filename().string();
  std::error_code ec;
  return name.starts_with(kCheckpointFolderPrefix) && name.find('.') == std::string::npos &&
         std::filesystem::is_directory(folder, ec) && std::filesystem::exists(folder / kModelFile, ec);
}

// The header of model.adm. tensor_model_parallel_size and pipeline_model_parallel_size: the sizes of the run whose
// optimizer files lie beside it.
void set_model_file_meta(nlohmann::json& meta, const TrainingPosition& position, const model::GptConfig& config,
                         DType weight_dtype, const nlohmann::json& names, const std::string& config_yaml) {
  meta["format"] = kFormatVersion;
  meta["kind"] = "adamant-gpt-checkpoint";
  meta["step"] = position.step;
  meta["consumed_samples"] = position.consumed_samples;
  meta["architecture"] = architecture_of(config);
  meta["gelu"] = kernels::gelu_form_name(config.gelu());  // the GELU the weights are trained with
  meta["tensor_model_parallel_size"] = config.tensor_parallel_size;
  meta["pipeline_model_parallel_size"] = config.pipeline_parallel_size;
  meta["weight_dtype"] = std::string(dtype_name(weight_dtype));
  meta["params"] = names;
  meta["config_yaml"] = config_yaml;
}

}  // namespace

void write_weights_checkpoint(const std::filesystem::path& folder, const model::GptConfig& config, const void* weights,
                              DType weight_dtype, const std::string& config_yaml) {
  ADAMANT_CHECK(config.tensor_parallel_size == 1, "write_weights_checkpoint takes the whole model");
  const ParamList params = model::build_param_list(config);
  std::filesystem::create_directories(folder);
  ArchiveWriter writer(folder / kModelFile);
  nlohmann::json names = nlohmann::json::array();
  for (const ParamSpec& p : params.params) {
    writer.add(p.name, static_cast<const char*>(weights) + p.offset * dtype_size(weight_dtype), weight_dtype, p.shape);
    names.push_back(p.name);
  }
  set_model_file_meta(writer.meta(), TrainingPosition{}, config, weight_dtype, names, config_yaml);
  writer.commit();
}

std::string new_run_id() {
  std::random_device entropy;
  const std::uint64_t id = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy() ^
                           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", id);
}

std::vector<std::filesystem::path> complete_checkpoints(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (is_complete_checkpoint(entry.path())) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort by step
  return out;
}

std::string checkpoint_run_id(const std::filesystem::path& checkpoint) {
  try {
    return ArchiveReader(checkpoint / kModelFile).meta().value("run_id", "");
  } catch (const Error&) {
    return "";
  }
}

std::optional<std::filesystem::path> latest_named(const std::filesystem::path& dir) {
  std::ifstream in(dir / kLatestFile);
  std::string name;
  if (!in || !std::getline(in, name) || name.empty()) return std::nullopt;
  return dir / name;
}

std::optional<std::string> find_checkpoint_damage(const std::filesystem::path& checkpoint, int part, int parts) {
  if (!is_complete_checkpoint(checkpoint))
    return fmt::format("{} is missing or has no {}", checkpoint.string(), kModelFile);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(checkpoint)) {
    if (entry.is_regular_file() && entry.path().extension() == ".adm") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  try {
    for (std::size_t i = static_cast<std::size_t>(part); i < files.size(); i += static_cast<std::size_t>(parts)) {
      const ArchiveReader reader(files[i]);
      for (const ArchiveEntry& e : reader.entries()) reader.read_all(e.name);  // checks each tensor's CRC32C
    }
  } catch (const Error& e) {
    return e.what();
  }
  return std::nullopt;
}

CheckpointStore::CheckpointStore(std::filesystem::path dir, int keep, std::string run_id, bool node_local)
    : dir_(std::move(dir)), keep_(keep), run_id_(std::move(run_id)), node_local_(node_local) {}

std::optional<std::filesystem::path> CheckpointStore::latest() const {
  if (const auto named = latest_named(dir_); named && is_complete_checkpoint(*named)) return named;
  const auto all = complete_checkpoints(dir_);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::filesystem::path CheckpointStore::save(const TrainingPosition& position, model::GptModel& model,
                                            optim::Optimizer& optimizer, const std::string& config_yaml,
                                            comm::ProcessGrid& grid) const {
  optimizer.wait_for_params();
  comm::Communicator& world = grid.world();
  const std::string name = fmt::format("{}{:08}", kCheckpointFolderPrefix, position.step);
  const auto final_dir = dir_ / name;
  const auto partial_dir = dir_ / (name + std::string(kCheckpointPartialSuffix));
  const int tp = model.tp_size(), pp = grid.pp_size();
  const CheckpointRoles roles = checkpoint_roles(grid, node_local_);
  if (roles.prepares_folder) {
    std::filesystem::remove_all(partial_dir);
    std::filesystem::create_directories(partial_dir);
    for (int s = 0; s < pp; ++s) {
      for (int r = 0; r < tp; ++r) std::filesystem::create_directories(partial_dir / optimizer_folder(s, pp, r, tp));
    }
  }
  world.barrier();

  optimizer.save(partial_dir / optimizer_folder(grid.pp_rank(), pp, grid.tp_rank(), tp));
  // The model file holds the whole model: the tensor-parallel ranks of data-parallel rank 0 of each stage
  // join their slices, parameter by parameter (MPI counts stay small), and each later stage's first rank
  // sends its whole parameters on to world rank 0.
  if (roles.gathers_model) {
    const ParamList& params = model.params();
    // No parameter all-gather is pending: waited for above, before the optimizer's files.
    std::vector<std::uint8_t> staging;
    const Tensor weights = host_weights(model, staging);
    const std::size_t element = dtype_size(weights.dtype);
    const bool joins = grid.tp_rank() == 0;  // holds the stage's whole parameters
    std::optional<ArchiveWriter> writer;
    if (roles.writes_model) writer.emplace(partial_dir / kModelFile);
    std::vector<std::uint8_t> gathered, whole;
    nlohmann::json names = nlohmann::json::array();
    for (const ParamSpec& p : params.params) {
      if (p.tied_copy) continue;  // the first stage saves the word embedding
      const Tensor slice = weights.slice(p.offset, p.numel);
      const void* data = slice.data;
      if (tp > 1) {
        gathered.resize(static_cast<std::size_t>(tp) * slice.bytes());
        const Tensor all = Tensor::flat(gathered.data(), weights.dtype, Device::cpu(), tp * p.numel);
        grid.tensor_parallel_group().all_gather(slice, all);
        if (joins) {
          whole.resize(gathered.size());
          for (int r = 0; r < tp; ++r) {
            model::scatter_slice(model.config(), p, r, gathered.data() + r * slice.bytes(), whole.data(), element);
          }
          data = whole.data();
        }
      }
      if (writer) {
        writer->add(p.name, data, weights.dtype, model::whole_shape(model.config(), p));
        names.push_back(p.name);
      } else if (joins && pp > 1) {
        const std::size_t numel = static_cast<std::size_t>(tp) * p.numel;
        grid.pipeline_group()
            .send_async(Tensor::flat(const_cast<void*>(data), weights.dtype, Device::cpu(), numel), 0)
            .wait(Stream());
      }
    }
    if (writer) {
      for (int s = 1; s < pp; ++s) {  // the later stages' parameters, in the order they send them
        const ParamList stage_params =
            model::build_stage_param_list(model.config(), model::pipeline_stage(model.config(), s));
        for (const ParamSpec& p : stage_params.params) {
          if (p.tied_copy) continue;
          whole.resize(static_cast<std::size_t>(tp) * p.numel * element);
          grid.pipeline_group()
              .recv_async(Tensor::flat(whole.data(), weights.dtype, Device::cpu(), tp * p.numel), s)
              .wait(Stream());
          writer->add(p.name, whole.data(), weights.dtype, model::whole_shape(model.config(), p));
          names.push_back(p.name);
        }
      }
      set_model_file_meta(writer->meta(), position, model.config(), weights.dtype, names, config_yaml);
      writer->meta()["run_id"] = run_id_;
      writer->commit();
    }
  }
  world.barrier();  // every rank's optimizer shard is on disk
  if (roles.prepares_folder) {
    std::filesystem::remove_all(final_dir);
    std::filesystem::rename(partial_dir, final_dir);
    write_file_atomically(dir_ / kLatestFile, name + "\n");
    if (keep_ > 0) {  // only this run's own checkpoints rotate; another run's are never deleted here
      std::vector<std::filesystem::path> own;
      for (const auto& checkpoint : complete_checkpoints(dir_)) {
        if (checkpoint_run_id(checkpoint) == run_id_) own.push_back(checkpoint);
      }
      for (std::size_t i = 0; i + static_cast<std::size_t>(keep_) < own.size(); ++i) {
        std::filesystem::remove_all(own[i]);
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
  const kernels::GeluForm trained = trained_gelu(meta);
  ADAMANT_CHECK(trained == model.config().gelu(),
                "checkpoint {} was trained with {} but this config computes {}: the weights would meet another "
                "activation; {}",
                checkpoint.string(), model::gelu_form_words(trained), model::gelu_form_words(model.config().gelu()),
                model::gelu_keys_for(trained));
  const ParamList& params = model.params();
  const Tensor model_weights = model.weights();
  std::vector<std::uint8_t> staging;  // GPU weights: filled on the host, uploaded once below
  const Tensor weights = host_weights(model, staging);
  const int tp = model.tp_size();
  std::vector<std::uint8_t> slice_bytes;
  for (const ParamSpec& p : params.params) {
    const ArchiveEntry& e = reader.entry(p.name);
    ADAMANT_CHECK(e.shape == model::whole_shape(model.config(), p),
                  "checkpoint {}: parameter {} has another shape there; it was written for another model",
                  checkpoint.string(), p.name);
    Tensor dst = weights.slice(p.offset, p.numel);
    if (e.dtype == weights.dtype && tp == 1) {
      reader.read(p.name, dst.data, dst.bytes());
      continue;
    }
    std::vector<std::uint8_t> raw = reader.read_all(p.name);  // the whole parameter
    const void* slice = raw.data();
    if (tp > 1) {  // this rank's slice of it
      slice_bytes.resize(p.numel * dtype_size(e.dtype));
      model::gather_slice(model.config(), p, model.tp_rank(), raw.data(), slice_bytes.data(), dtype_size(e.dtype));
      slice = slice_bytes.data();
    }
    // e.g. generate in fp32 from bf16 training weights
    kernels::cast(Tensor::flat(const_cast<void*>(slice), e.dtype, Device::cpu(), p.numel), dst, Stream());
  }
  if (model_weights.device.is_cuda()) {
    copy_bytes(model_weights.data, model_weights.device, weights.data, Device::cpu(), weights.bytes());
  }
  if (optimizer != nullptr) {
    const int saved_tp = meta.value("tensor_model_parallel_size", 1);
    const int saved_pp = meta.value("pipeline_model_parallel_size", 1);
    // Every stage (and tensor-parallel rank) that saved holds part of the state; each parameter is taken
    // by name, so the stages may be split otherwise now, and at another tensor-parallel size the saved
    // slices are mapped onto this rank's element by element.
    optim::SavedState saved;
    for (int s = 0; s < saved_pp; ++s) {
      for (int t = 0; t < saved_tp; ++t) {
        if (saved_tp == tp && t != model.tp_rank()) continue;
        saved.folders.push_back({checkpoint / optimizer_folder(s, saved_pp, t, saved_tp), s, t});
      }
    }
    if (saved_tp != tp) saved.remap = split_remap(model.config(), model.params(), saved_tp, model.tp_rank());
    optimizer->load(saved);
  }
  return {meta.at("step").get<std::int64_t>(), meta.at("consumed_samples").get<std::int64_t>()};
}

std::string checkpoint_config_yaml(const std::filesystem::path& checkpoint) {
  ArchiveReader reader(checkpoint / kModelFile);
  return reader.meta().value("config_yaml", "");
}

}  // namespace adamant::train
