// NeMo keys (megatron_gpt_config.yaml, Lightning trainer, exp_manager) that a
// user's file may carry and Adamant accepts without acting on them. Keys whose
// value selects maths Adamant does not implement (rotary embeddings, context
// parallelism, fp8, ...) accept only the value Adamant matches; anything else is
// an error naming the key. Values are read only when a rule needs them, so
// interpolations Adamant cannot resolve (${multiply:...}) are harmless on keys
// accepted with any value.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>

#include "adamant/core/error.h"
#include "adamant/train/config_schema.h"
#include "adamant/train/config_values.h"

namespace adamant::train::detail {
namespace {

using Check = std::function<void(const YAML::Node&, const std::string&, const TrainConfig&)>;

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

NemoKeySpec any(std::string path) { return {std::move(path), nullptr}; }

// Accepts `wanted` (and null when null_ok); `feature` says what other values would ask for.
NemoKeySpec only_bool(std::string path, bool wanted, std::string feature, bool null_ok = true) {
  Check check = [path, wanted, feature, null_ok](const YAML::Node& v, const std::string& where, const TrainConfig&) {
    if (v.IsNull() && null_ok) return;
    if (read_bool(v, path, where) != wanted) {
      fail("{}: {} is not supported by Adamant (got {}){}; set it to {} or remove the key", path, feature, describe(v),
           where, wanted ? "true" : "false");
    }
  };
  return {path, check};
}

NemoKeySpec only_null(std::string path, std::string feature) {
  Check check = [path, feature](const YAML::Node& v, const std::string& where, const TrainConfig&) {
    if (!v.IsNull()) {
      fail("{}: {} is not supported by Adamant (got {}){}; set it to null or remove the key", path, feature,
           describe(v), where);
    }
  };
  return {path, check};
}

NemoKeySpec only_int(std::string path, int wanted, std::string feature) {
  Check check = [path, wanted, feature](const YAML::Node& v, const std::string& where, const TrainConfig&) {
    if (v.IsNull()) return;
    if (read_int(v, path, where) != wanted) {
      fail("{}: {} is not supported by Adamant (got {}){}; set it to {} or remove the key", path, feature, describe(v),
           where, wanted);
    }
  };
  return {path, check};
}

NemoKeySpec only_number(std::string path, double wanted, std::string feature) {
  Check check = [path, wanted, feature](const YAML::Node& v, const std::string& where, const TrainConfig&) {
    if (v.IsNull()) return;
    if (std::abs(read_number(v, path, where) - wanted) > 1e-12 * std::max(1.0, std::abs(wanted))) {
      fail("{}: {} (got {}){}; set it to {} or remove the key", path, feature, describe(v), where,
           format_number(wanted));
    }
  };
  return {path, check};
}

// Case-insensitive, as NeMo spells some of these both ways (layernorm / LayerNorm).
NemoKeySpec only_string(std::string path, std::initializer_list<std::string_view> accepted, std::string feature) {
  std::vector<std::string> allowed(accepted.begin(), accepted.end());
  Check check = [path, allowed, feature](const YAML::Node& v, const std::string& where, const TrainConfig&) {
    if (v.IsNull()) return;
    const std::string text = lowercase(read_string(v, path, where));
    for (const auto& option : allowed) {
      if (text == lowercase(option)) return;
    }
    fail("{}: Adamant implements only {} '{}' (got {}){}; set it to '{}' or remove the key", path, feature,
         allowed.front(), describe(v), where, allowed.front());
  };
  return {path, check};
}

NemoKeySpec custom(std::string path, Check check) { return {std::move(path), std::move(check)}; }

std::vector<NemoKeySpec> make_nemo_keys() {
  std::vector<NemoKeySpec> k;
  // Top level (Hydra and NeMo's launcher script).
  for (const char* key : {"name", "defaults", "hydra"}) k.push_back(any(key));
  k.push_back(only_null("restore_from_path", "initialising from a .nemo file"));

  // Lightning trainer: Adamant trains by steps, one optimizer step per global batch.
  for (const char* key : {"logger", "enable_checkpointing", "use_distributed_sampler", "replace_sampler_ddp",
                          "limit_test_batches", "benchmark", "enable_model_summary", "enable_progress_bar",
                          "num_sanity_val_steps", "strategy", "deterministic", "check_val_every_n_epoch"}) {
    k.push_back(any(fmt::format("trainer.{}", key)));
  }
  k.push_back(custom("trainer.max_epochs", [](const YAML::Node& v, const std::string& where, const TrainConfig&) {
    if (v.IsNull() || read_int(v, "trainer.max_epochs", where) == -1) return;
    fail(
        "trainer.max_epochs: Adamant stops only at trainer.max_steps (got {}){}; set trainer.max_epochs: -1 (or "
        "null, or remove it) and choose trainer.max_steps",
        describe(v), where);
  }));
  k.push_back(only_null("trainer.max_time", "a wall-clock limit"));
  k.push_back(only_int("trainer.accumulate_grad_batches", 1,
                       "Lightning gradient accumulation (Adamant accumulates global_batch_size / (micro_batch_size "
                       "x data-parallel size) micro-batches per step)"));
  k.push_back(only_string("trainer.gradient_clip_algorithm", {"norm"}, "gradient clipping by"));

  // model: performance switches and features whose default Adamant matches.
  for (const char* key : {"mcore_gpt",
                          "apply_query_key_layer_scaling",
                          "persist_layer_norm",
                          "rotary_percentage",
                          "rotary_base",
                          "overlap_p2p_comm",
                          "batch_p2p_comm",
                          "grad_allreduce_chunk_size_mb",
                          "grad_div_ar_fusion",
                          "gradient_accumulation_fusion",
                          "bias_dropout_add_fusion",
                          "masked_softmax_fusion",
                          "get_attention_mask_from_fusion",
                          "apply_rope_fusion",
                          "use_cpu_initialization",
                          "onnx_safe",
                          "apex_transformer_log_level",
                          "gradient_as_bucket_view",
                          "sync_batch_comm",
                          "nccl_communicator_config_path",
                          "activations_checkpoint_method",
                          "activations_checkpoint_num_layers",
                          "num_micro_batches_with_partial_activation_checkpoints",
                          "activations_checkpoint_layers_per_pipeline",
                          "transformer_engine",
                          "fp8_e4m3",
                          "fp8_hybrid",
                          "fp8_margin",
                          "fp8_interval",
                          "fp8_amax_history_len",
                          "fp8_amax_compute_algo",
                          "reduce_amax",
                          "use_emha",
                          "ub_tp_comm_overlap",
                          "ub_tp_comm_overlap_cfg",
                          "use_flash_attention",
                          "cpu_offloading",
                          "cpu_offloading_num_layers",
                          "cpu_offloading_activations",
                          "cpu_offloading_weights",
                          "sharp",
                          "mem_profile_params",
                          "nsys_profile",
                          "gc_interval",
                          "precision",
                          "deterministic_mode"}) {
    k.push_back(any(fmt::format("model.{}", key)));
  }
  k.push_back(only_null("model.rampup_batch_size", "batch-size ramp-up"));
  k.push_back(only_int("model.context_parallel_size", 1, "context parallelism"));
  k.push_back(only_bool("model.use_scaled_init_method", true,
                        "unscaled output-projection init (Adamant scales by 1/sqrt(2*num_layers))"));
  k.push_back(only_number("model.ffn_dropout", 0.0, "Adamant has no dropout inside the MLP"));
  k.push_back(only_string("model.normalization", {"layernorm"}, "normalization"));
  const std::string epsilon = format_number(model::GptConfig{}.layernorm_epsilon);
  k.push_back(only_number("model.layernorm_epsilon", std::stod(epsilon),
                          fmt::format("Adamant's layernorm epsilon is fixed at {}", epsilon)));
  k.push_back(only_bool("model.do_layer_norm_weight_decay", false, "weight decay on layernorm weights"));
  k.push_back(only_bool("model.pre_process", true, "a model without the embedding stage"));
  k.push_back(only_bool("model.post_process", true, "a model without the output stage"));
  k.push_back(only_bool("model.bias", true, "a model without biases"));
  k.push_back(only_string("model.activation", {"gelu"}, "the activation"));
  k.push_back(only_bool("model.headscale", false, "NormFormer head scaling"));
  k.push_back(only_string("model.transformer_block_type", {"pre_ln"}, "the transformer block type"));
  k.push_back(only_bool("model.normalize_attention_scores", true, "unscaled attention scores"));
  k.push_back(only_string("model.position_embedding_type", {"learned_absolute"}, "the position embedding"));
  k.push_back(only_string("model.attention_type", {"multihead"}, "attention type"));
  k.push_back(only_bool("model.share_embeddings_and_output_weights", true, "an untied output layer"));
  k.push_back(only_bool("model.fp32_residual_connection", false, "an fp32 residual stream"));
  k.push_back(only_bool("model.fp16_lm_cross_entropy", false, "a half-precision cross-entropy"));
  k.push_back(only_bool("model.fp8", false, "fp8 training"));
  k.push_back(only_null("model.resume_from_checkpoint",
                        "resuming from a NeMo checkpoint path (name an Adamant checkpoint folder in "
                        "exp_manager.resume_from_checkpoint)"));
  k.push_back(only_null("model.seq_len_interpolation_factor", "position interpolation"));
  k.push_back(custom("model.kv_channels", [](const YAML::Node& v, const std::string& where, const TrainConfig& c) {
    if (v.IsNull()) return;
    const int head_dim = c.model.hidden_size / std::max(1, c.model.num_attention_heads);
    if (read_int(v, "model.kv_channels", where) != head_dim) {
      fail(
          "model.kv_channels: Adamant's head size is hidden_size / num_attention_heads = {} (got {}){}; set it to "
          "null",
          head_dim, describe(v), where);
    }
  }));
  k.push_back(custom("model.num_query_groups", [](const YAML::Node& v, const std::string& where, const TrainConfig& c) {
    if (v.IsNull() || read_int(v, "model.num_query_groups", where) == c.model.num_attention_heads) return;
    fail("model.num_query_groups: grouped-query attention is not supported by Adamant (got {}){}; set it to null",
         describe(v), where);
  }));

  k.push_back(only_null("model.tokenizer.model", "a SentencePiece tokenizer"));
  k.push_back(any("model.tokenizer.delimiter"));
  k.push_back(any("model.tokenizer.sentencepiece_legacy"));

  for (const char* key : {"mmap_bin_files", "skip_warmup", "num_workers", "dataloader_type", "validation_drop_last",
                          "pad_samples_to_global_batch_size", "shuffle_documents", "exchange_indices_distributed",
                          "delay_data_init", "delay_data_mmap", "data_cache_generation_only"}) {
    k.push_back(any(fmt::format("model.data.{}", key)));
  }
  k.push_back(only_string("model.data.data_impl", {"mmap"}, "the dataset format"));
  k.push_back(only_bool("model.data.reset_position_ids", false, "restarting position ids at each document"));
  k.push_back(only_bool("model.data.reset_attention_mask", false, "per-document attention masks"));
  k.push_back(only_bool("model.data.eod_mask_loss", false, "masking the loss on end-of-document tokens"));
  k.push_back(only_bool("model.data.no_seqlen_plus_one_input_tokens", false, "samples of seq_length tokens"));
  k.push_back(custom("model.data.seq_length", [](const YAML::Node& v, const std::string& where, const TrainConfig& c) {
    const int length = read_int(v, "model.data.seq_length", where);
    if (length != c.model.seq_length) {
      fail(
          "model.data.seq_length ({}) differs from model.encoder_seq_length ({}){}; Adamant samples "
          "encoder_seq_length tokens: set model.data.seq_length: ${{model.encoder_seq_length}}",
          length, c.model.seq_length, where);
    }
  }));

  // Apex optimizer options Adamant does not need (buffers, process groups, locks).
  for (const char* key : {"contiguous_param_buffer", "param_sync_dtype", "store_params", "nccl_ub", "capturable",
                          "distribute_within_nodes", "disable_distributed_parameters", "lock_timeout", "set_grad_none",
                          "master_weights"}) {
    k.push_back(any(fmt::format("model.optim.{}", key)));
  }
  k.push_back(only_bool("model.optim.contiguous_grad_buffer", true,
                        "a gradient buffer per parameter (Adamant's gradients are always one contiguous buffer)"));
  k.push_back(only_bool("model.optim.amsgrad", false, "AMSGrad"));
  k.push_back(only_bool("model.optim.bias_correction", true, "Adam without bias correction"));
  k.push_back(only_bool("model.optim.with_scaled_states", false, "scaled optimizer states"));
  k.push_back(
      only_string("model.optim.dtype", {"fp32", "float32", "torch.float32", "32"}, "fp32 optimizer state, i.e. dtype"));
  for (const char* key : {"last_epoch", "monitor", "reduce_on_plateau", "interval", "frequency"}) {
    k.push_back(any(fmt::format("model.optim.sched.{}", key)));
  }
  k.push_back(only_null("model.optim.sched.warmup_ratio", "warmup as a ratio (use model.optim.sched.warmup_steps)"));
  k.push_back(only_null("model.optim.sched.hold_steps", "a hold phase"));
  k.push_back(only_null("model.optim.sched.hold_ratio", "a hold phase"));

  // exp_manager: loggers and callbacks Adamant replaces by its own metrics and checkpoints.
  for (const char* key : {"explicit_log_dir",
                          "create_tensorboard_logger",
                          "create_wandb_logger",
                          "wandb_logger_kwargs",
                          "create_neptune_logger",
                          "neptune_logger_kwargs",
                          "create_mlflow_logger",
                          "mlflow_logger_kwargs",
                          "create_dllogger_logger",
                          "dllogger_logger_kwargs",
                          "create_clearml_logger",
                          "clearml_logger_kwargs",
                          "resume_ignore_no_checkpoint",
                          "log_step_timing",
                          "step_timing_kwargs",
                          "seconds_to_sleep",
                          "create_early_stopping_callback",
                          "early_stopping_callback_params",
                          "version",
                          "use_datetime_version",
                          "max_time_per_run",
                          "log_local_rank_0_only",
                          "log_global_rank_0_only",
                          "files_to_copy",
                          "ema.decay",
                          "ema.cpu_offload",
                          "ema.validate_original_weights",
                          "ema.every_n_steps"}) {
    k.push_back(any(fmt::format("exp_manager.{}", key)));
  }
  k.push_back(only_bool("exp_manager.ema.enable", false, "an exponential moving average of the weights"));
  for (const char* key : {"monitor", "mode", "filename", "save_nemo_on_train_end", "always_save_nemo",
                          "model_parallel_size", "save_last", "save_best_model", "async_save", "every_n_epochs",
                          "save_weights_only", "train_time_interval", "save_on_train_epoch_end", "dirpath"}) {
    k.push_back(any(fmt::format("exp_manager.checkpoint_callback_params.{}", key)));
  }
  return k;
}

}  // namespace

const std::vector<NemoKeySpec>& nemo_keys() {
  static const std::vector<NemoKeySpec> keys = make_nemo_keys();
  return keys;
}

const NemoKeySpec* find_nemo_key(std::string_view path) {
  for (const auto& key : nemo_keys()) {
    if (key.path == path) return &key;
  }
  return nullptr;
}

}  // namespace adamant::train::detail
