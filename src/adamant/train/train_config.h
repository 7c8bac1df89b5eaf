#pragma once
// The training configuration, with NeMo's key names (megatron_gpt_config.yaml),
// parsed from YAML plus `key=value` command-line overrides. Each layer owns its
// keys: their defaults and checks live in its option struct; config_fields.cpp
// maps every YAML path onto one field of these structs (docs/config.md lists them).
#include <filesystem>
#include <string>
#include <vector>

#include "adamant/data/data_options.h"
#include "adamant/model/gpt_config.h"
#include "adamant/optim/lr_schedule.h"
#include "adamant/optim/optimizer.h"
#include "adamant/train/train_options.h"

namespace adamant::train {

struct TrainConfig {
  TrainerOptions trainer;         // trainer.*, model.seed, model.restore_from_path
  model::GptConfig model;         // the model's shape and regularisation (model.*)
  optim::OptimizerOptions optim;  // model.optim.*, model.megatron_amp_O2, fp16 loss scaling, gradient clipping
  optim::LrSchedule sched;        // model.optim.lr, model.optim.sched.*
  data::DataOptions data;         // batch sizes, model.data.*, model.tokenizer.*
  ExpManagerOptions exp_manager;  // exp_manager.*
  // NeMo keys present in the input that Adamant accepts but does not act on
  // (sorted YAML paths); not part of the configuration itself, never written by to_yaml.
  std::vector<std::string> ignored_keys;

  // The run folder: exp_manager.exp_dir / exp_manager.name.
  std::filesystem::path run_dir() const { return exp_manager.exp_dir / exp_manager.name; }

  // Compares the configuration only, not ignored_keys.
  bool operator==(const TrainConfig& other) const {
    return trainer == other.trainer && model == other.model && optim == other.optim && sched == other.sched &&
           data == other.data && exp_manager == other.exp_manager;
  }
};

// Parses a YAML file, then applies `key=value` overrides (dotted NeMo paths, YAML
// values: model.optim.lr=3e-4, model.optim.betas=[0.9,0.95]). Unknown keys (with a
// did-you-mean suggestion), wrong types, out-of-range values and impossible
// combinations throw adamant::Error naming the key and the fix (each layer's
// validate(), then the checks across layers).
TrainConfig load_train_config(const std::filesystem::path& yaml_file, const std::vector<std::string>& overrides);
TrainConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                               const std::string& source_name = "<config>");
// The resolved configuration as YAML (written into every run and checkpoint).
std::string to_yaml(const TrainConfig& config);
// One warning line listing config.ignored_keys (print it once, on rank 0); empty when there are none.
std::string ignored_keys_warning(const TrainConfig& config);
// Every key Adamant acts on as the rows of a Markdown table (key, default, meaning): docs/config.md's
// key table, which a test keeps equal to this (`adamant config-keys` prints it).
std::string config_keys_markdown();

// Weights in the model: bf16/fp16 with megatron_amp_O2 (fp32 main weights in the optimizer), else fp32.
DType weight_dtype_of(const TrainConfig& config);
// The optimizer's options with model_dtype filled in from trainer.precision and model.megatron_amp_O2.
optim::OptimizerOptions optimizer_options_of(const TrainConfig& config);
// The schedule with its length filled in (null model.optim.sched.max_steps: trainer.max_steps).
optim::LrSchedule lr_schedule_of(const TrainConfig& config);

}  // namespace adamant::train
