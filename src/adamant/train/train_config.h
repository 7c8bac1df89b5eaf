#pragma once
// The training configuration, with NeMo's key names (megatron_gpt_config.yaml),
// parsed from YAML plus `key=value` command-line overrides. Every field below is
// a key; its YAML path is given in the comment where it differs from the name.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adamant/core/dtype.h"

namespace adamant::train {

struct SchedConfig {                     // model.optim.sched
  std::string name = "CosineAnnealing";  // CosineAnnealing | constant (NeMo names)
  int warmup_steps = 0;
  int constant_steps = 0;
  double min_lr = 0.0;
  std::optional<int> max_steps;  // defaults to trainer.max_steps

  bool operator==(const SchedConfig&) const = default;
};

struct OptimConfig {                // model.optim
  std::string name = "fused_adam";  // fused_adam | distributed_fused_adam
  double lr = 1e-4;
  double weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.999;  // betas: [b1, b2]
  double eps = 1e-8;
  bool adam_w_mode = true;
  // distributed_fused_adam (Apex names)
  double bucket_cap_mb = 100.0;
  bool overlap_grad_sync = true;
  bool overlap_param_sync = false;
  DType grad_sync_dtype = DType::f32;  // fp32 | bf16
  bool store_param_remainders = false;
  bool average_grad_sync = true;
  bool contiguous_grad_buffer = true;
  SchedConfig sched;

  bool operator==(const OptimConfig&) const = default;
};

struct DataConfig {                                         // model.data
  std::vector<std::pair<double, std::string>> data_prefix;  // [w1, prefix1, w2, prefix2] or [prefix]
  std::string splits_string = "969,30,1";
  std::int64_t seed = 1234;  // model.seed
  std::filesystem::path index_mapping_dir;

  bool operator==(const DataConfig&) const = default;
};

struct TokenizerConfig {  // model.tokenizer
  std::string library = "megatron";
  std::string type = "GPT2BPETokenizer";
  std::filesystem::path vocab_file;  // encoder.json
  std::filesystem::path merge_file;  // vocab.bpe

  bool operator==(const TokenizerConfig&) const = default;
};

struct ModelConfig {  // model
  int micro_batch_size = 4;
  int global_batch_size = 8;
  int tensor_model_parallel_size = 1;
  bool sequence_parallel = false;
  bool megatron_amp_O2 = false;
  int encoder_seq_length = 2048;
  int max_position_embeddings = 2048;
  int num_layers = 12;
  int hidden_size = 768;
  int ffn_hidden_size = 3072;
  int num_attention_heads = 12;
  double init_method_std = 0.02;
  bool openai_gelu = false;  // GPT-2's tanh approximation of GELU instead of the exact erf form
  // A Hugging Face GPT-2 folder (model.safetensors, config.json) whose weights start the run
  // (fine-tuning); empty: random init. A checkpoint found by exp_manager.resume_if_exists wins.
  std::filesystem::path restore_from_path;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  std::string activations_checkpoint_granularity;  // NeMo's null (empty) or "selective"
  int make_vocab_size_divisible_by = 128;
  std::int64_t seed = 1234;
  double native_amp_init_scale = 4294967296.0;  // fp16 dynamic loss scaling
  int native_amp_growth_interval = 1000;
  int hysteresis = 2;
  TokenizerConfig tokenizer;
  DataConfig data;
  OptimConfig optim;

  bool operator==(const ModelConfig&) const = default;
};

struct TrainerConfig {              // trainer
  std::string accelerator = "cpu";  // cpu | gpu
  int devices = 1;
  int num_nodes = 1;
  DType precision = DType::bf16;  // 32 | bf16 | 16 (and NeMo's bf16-mixed, 16-mixed)
  int max_steps = 100;
  int val_check_interval = 50;
  int limit_val_batches = 10;
  int log_every_n_steps = 1;
  double gradient_clip_val = 1.0;            // 0 disables clipping
  double collective_timeout_s = 1800.0;      // a collective wait longer than this ends the job; 0: no limit
  bool allow_irregular_node_layout = false;  // tensor-parallel groups across hosts, unequal ranks per host

  bool operator==(const TrainerConfig&) const = default;
};

struct CheckpointConfig {       // exp_manager.checkpoint_callback_params
  int every_n_train_steps = 0;  // 0: only at the end
  int save_top_k = 1;           // newest checkpoints kept (-1: all)
  bool node_local = false;      // exp_dir is on each host's own disk (docs/multinode.md)

  bool operator==(const CheckpointConfig&) const = default;
};

struct ExpManagerConfig {  // exp_manager
  std::filesystem::path exp_dir = "runs";
  std::string name = "adamant_gpt";
  bool resume_if_exists = true;
  // A checkpoint folder to continue from (NeMo's key); empty: none. It takes precedence over resume_if_exists.
  std::filesystem::path resume_from_checkpoint;
  // A fresh run in a folder that holds another run's checkpoints deletes them instead of refusing to start.
  bool overwrite_existing_run = false;
  bool create_checkpoint_callback = true;
  CheckpointConfig checkpoint_callback_params;

  bool operator==(const ExpManagerConfig&) const = default;
};

struct TrainConfig {
  TrainerConfig trainer;
  ModelConfig model;
  ExpManagerConfig exp_manager;
  // NeMo keys present in the input that Adamant accepts but does not act on
  // (sorted YAML paths); not part of the configuration itself, never written by to_yaml.
  std::vector<std::string> ignored_keys;

  // The run folder: exp_manager.exp_dir / exp_manager.name.
  std::filesystem::path run_dir() const { return exp_manager.exp_dir / exp_manager.name; }

  // Compares the configuration only, not ignored_keys.
  bool operator==(const TrainConfig& other) const {
    return trainer == other.trainer && model == other.model && exp_manager == other.exp_manager;
  }
};

// Parses a YAML file, then applies `key=value` overrides (dotted NeMo paths, YAML
// values: model.optim.lr=3e-4, model.optim.betas=[0.9,0.95]). Unknown keys (with a
// did-you-mean suggestion), wrong types, out-of-range values and impossible
// combinations throw adamant::Error naming the key and the fix.
TrainConfig load_train_config(const std::filesystem::path& yaml_file, const std::vector<std::string>& overrides);
TrainConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                               const std::string& source_name = "<config>");
// The resolved configuration as YAML (written into every run and checkpoint).
std::string to_yaml(const TrainConfig& config);
// One warning line listing config.ignored_keys (print it once, on rank 0); empty when there are none.
std::string ignored_keys_warning(const TrainConfig& config);

}  // namespace adamant::train
