// The keys Adamant acts on: one entry per TrainConfig field, at its NeMo path.
#include <fmt/format.h>

#include <utility>

#include "adamant/core/error.h"
#include "adamant/train/config_schema.h"
#include "adamant/train/config_values.h"

namespace adamant::train::detail {
namespace {

// Each helper takes `access`, a generic lambda `[](auto& c) -> auto& { return c.x.y; }`
// that yields the field of a const or mutable TrainConfig.
template <typename Access>
FieldSpec int_field(std::string path, Access access) {
  return {path,
          [access, path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            access(c) = read_int(v, path, where);
          },
          [access](const TrainConfig& c) { return fmt::format("{}", access(c)); }};
}

template <typename Access>
FieldSpec number_field(std::string path, Access access) {
  return {path,
          [access, path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            access(c) = read_number(v, path, where);
          },
          [access](const TrainConfig& c) { return format_number(access(c)); }};
}

template <typename Access>
FieldSpec bool_field(std::string path, Access access) {
  return {path,
          [access, path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            access(c) = read_bool(v, path, where);
          },
          [access](const TrainConfig& c) { return std::string(access(c) ? "true" : "false"); }};
}

template <typename Access>
FieldSpec string_field(std::string path, Access access) {
  return {path,
          [access, path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            access(c) = read_string(v, path, where);
          },
          [access](const TrainConfig& c) { return quote(access(c)); }};
}

// Paths may be null in NeMo files (tokenizer.vocab_file: null): null keeps the default.
template <typename Access>
FieldSpec path_field(std::string path, Access access) {
  return {path,
          [access, path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            if (!v.IsNull()) access(c) = read_string(v, path, where);
          },
          [access](const TrainConfig& c) { return quote(access(c).string()); }};
}

FieldSpec betas_field() {
  const std::string path = "model.optim.betas";
  return {path,
          [path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            if (!v.IsSequence() || v.size() != 2) {
              fail("{}: expected a list of two numbers [beta1, beta2], e.g. [0.9, 0.95], got {}{}", path, describe(v),
                   where);
            }
            c.model.optim.beta1 = read_number(v[0], path + "[0]", where);
            c.model.optim.beta2 = read_number(v[1], path + "[1]", where);
          },
          [](const TrainConfig& c) {
            return fmt::format("[{}, {}]", format_number(c.model.optim.beta1), format_number(c.model.optim.beta2));
          }};
}

// NeMo's blend syntax: [prefix], [w1, prefix1, w2, prefix2, ...] or a single string.
FieldSpec data_prefix_field() {
  const std::string path = "model.data.data_prefix";
  return {path,
          [path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
            auto& blend = c.model.data.data_prefix;
            blend.clear();
            if (v.IsNull()) return;
            if (v.IsScalar()) {
              blend.emplace_back(1.0, read_string(v, path, where));
              return;
            }
            constexpr std::string_view kForms =
                "[prefix] or [weight1, prefix1, weight2, prefix2, ...], e.g. [0.7, data/web_text_document, 0.3, "
                "data/books_text_document]";
            if (!v.IsSequence()) fail("{}: expected {}, got {}{}", path, kForms, describe(v), where);
            if (v.size() == 1) {
              blend.emplace_back(1.0, read_string(v[0], path + "[0]", where));
              return;
            }
            if (v.size() % 2 != 0) {
              fail("{}: a blend needs weight/prefix pairs, got {} entries{}; expected {}", path, v.size(), where,
                   kForms);
            }
            for (std::size_t i = 0; i < v.size(); i += 2) {
              const std::string weight_path = fmt::format("{}[{}]", path, i);
              const double weight = read_number(v[i], weight_path, where);
              if (weight <= 0.0) {
                fail("{}: blend weight must be > 0 (got {}){}; drop the dataset instead of giving it weight 0",
                     weight_path, v[i].Scalar(), where);
              }
              blend.emplace_back(weight, read_string(v[i + 1], fmt::format("{}[{}]", path, i + 1), where));
            }
          },
          [](const TrainConfig& c) {
            std::string text = "[";
            for (const auto& [weight, prefix] : c.model.data.data_prefix) {
              if (text.size() > 1) text += ", ";
              text += format_number(weight) + ", " + quote(prefix);
            }
            return text + "]";
          }};
}

std::vector<FieldSpec> make_fields() {
  std::vector<FieldSpec> f;
  f.push_back(string_field(
      "trainer.accelerator", [](auto& c) -> auto& { return c.trainer.accelerator; }));
  f.push_back(int_field(
      "trainer.devices", [](auto& c) -> auto& { return c.trainer.devices; }));
  f.push_back(int_field(
      "trainer.num_nodes", [](auto& c) -> auto& { return c.trainer.num_nodes; }));
  f.push_back({"trainer.precision",
               [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
                 c.trainer.precision = read_precision(v, "trainer.precision", where);
               },
               [](const TrainConfig& c) {
                 return std::string(c.trainer.precision == DType::f32   ? "32"
                                    : c.trainer.precision == DType::f16 ? "16"
                                                                        : "bf16");
               }});
  f.push_back(int_field(
      "trainer.max_steps", [](auto& c) -> auto& { return c.trainer.max_steps; }));
  f.push_back(int_field(
      "trainer.val_check_interval", [](auto& c) -> auto& { return c.trainer.val_check_interval; }));
  f.push_back(int_field(
      "trainer.limit_val_batches", [](auto& c) -> auto& { return c.trainer.limit_val_batches; }));
  f.push_back(int_field(
      "trainer.log_every_n_steps", [](auto& c) -> auto& { return c.trainer.log_every_n_steps; }));
  // Lightning's gradient_clip_val: null means no clipping, as 0 does.
  f.push_back({"trainer.gradient_clip_val",
               [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
                 c.trainer.gradient_clip_val = v.IsNull() ? 0.0 : read_number(v, "trainer.gradient_clip_val", where);
               },
               [](const TrainConfig& c) { return format_number(c.trainer.gradient_clip_val); }});
  f.push_back(number_field(
      "trainer.collective_timeout_s", [](auto& c) -> auto& { return c.trainer.collective_timeout_s; }));
  f.push_back(bool_field(
      "trainer.allow_irregular_node_layout", [](auto& c) -> auto& { return c.trainer.allow_irregular_node_layout; }));

  f.push_back(int_field(
      "model.micro_batch_size", [](auto& c) -> auto& { return c.model.micro_batch_size; }));
  f.push_back(int_field(
      "model.global_batch_size", [](auto& c) -> auto& { return c.model.global_batch_size; }));
  f.push_back(int_field(
      "model.tensor_model_parallel_size", [](auto& c) -> auto& { return c.model.tensor_model_parallel_size; }));
  f.push_back(bool_field(
      "model.sequence_parallel", [](auto& c) -> auto& { return c.model.sequence_parallel; }));
  f.push_back(bool_field(
      "model.megatron_amp_O2", [](auto& c) -> auto& { return c.model.megatron_amp_O2; }));
  f.push_back(int_field(
      "model.encoder_seq_length", [](auto& c) -> auto& { return c.model.encoder_seq_length; }));
  f.push_back(int_field(
      "model.max_position_embeddings", [](auto& c) -> auto& { return c.model.max_position_embeddings; }));
  f.push_back(int_field(
      "model.num_layers", [](auto& c) -> auto& { return c.model.num_layers; }));
  f.push_back(int_field(
      "model.hidden_size", [](auto& c) -> auto& { return c.model.hidden_size; }));
  f.push_back(int_field(
      "model.ffn_hidden_size", [](auto& c) -> auto& { return c.model.ffn_hidden_size; }));
  f.push_back(int_field(
      "model.num_attention_heads", [](auto& c) -> auto& { return c.model.num_attention_heads; }));
  f.push_back(number_field(
      "model.init_method_std", [](auto& c) -> auto& { return c.model.init_method_std; }));
  f.push_back(bool_field(
      "model.openai_gelu", [](auto& c) -> auto& { return c.model.openai_gelu; }));
  f.push_back(path_field(
      "model.restore_from_path", [](auto& c) -> auto& { return c.model.restore_from_path; }));
  f.push_back(number_field(
      "model.hidden_dropout", [](auto& c) -> auto& { return c.model.hidden_dropout; }));
  f.push_back(number_field(
      "model.attention_dropout", [](auto& c) -> auto& { return c.model.attention_dropout; }));
  f.push_back({"model.activations_checkpoint_granularity",
               [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
                 c.model.activations_checkpoint_granularity =
                     v.IsNull() ? std::string() : read_string(v, "model.activations_checkpoint_granularity", where);
               },
               [](const TrainConfig& c) {
                 const std::string& value = c.model.activations_checkpoint_granularity;
                 return value.empty() ? std::string("null") : value;
               }});
  f.push_back(int_field(
      "model.make_vocab_size_divisible_by", [](auto& c) -> auto& { return c.model.make_vocab_size_divisible_by; }));
  // NeMo has one seed (model.seed); the data pipeline uses it too.
  f.push_back({"model.seed",
               [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
                 c.model.seed = read_int64(v, "model.seed", where);
                 c.model.data.seed = c.model.seed;
               },
               [](const TrainConfig& c) { return fmt::format("{}", c.model.seed); }});
  f.push_back(number_field(
      "model.native_amp_init_scale", [](auto& c) -> auto& { return c.model.native_amp_init_scale; }));
  f.push_back(int_field(
      "model.native_amp_growth_interval", [](auto& c) -> auto& { return c.model.native_amp_growth_interval; }));
  f.push_back(int_field(
      "model.hysteresis", [](auto& c) -> auto& { return c.model.hysteresis; }));

  f.push_back(string_field(
      "model.tokenizer.library", [](auto& c) -> auto& { return c.model.tokenizer.library; }));
  f.push_back(string_field(
      "model.tokenizer.type", [](auto& c) -> auto& { return c.model.tokenizer.type; }));
  f.push_back(path_field(
      "model.tokenizer.vocab_file", [](auto& c) -> auto& { return c.model.tokenizer.vocab_file; }));
  f.push_back(path_field(
      "model.tokenizer.merge_file", [](auto& c) -> auto& { return c.model.tokenizer.merge_file; }));

  f.push_back(data_prefix_field());
  f.push_back(string_field(
      "model.data.splits_string", [](auto& c) -> auto& { return c.model.data.splits_string; }));
  f.push_back(path_field(
      "model.data.index_mapping_dir", [](auto& c) -> auto& { return c.model.data.index_mapping_dir; }));

  f.push_back(string_field(
      "model.optim.name", [](auto& c) -> auto& { return c.model.optim.name; }));
  f.push_back(number_field(
      "model.optim.lr", [](auto& c) -> auto& { return c.model.optim.lr; }));
  f.push_back(number_field(
      "model.optim.weight_decay", [](auto& c) -> auto& { return c.model.optim.weight_decay; }));
  f.push_back(betas_field());
  f.push_back(number_field(
      "model.optim.eps", [](auto& c) -> auto& { return c.model.optim.eps; }));
  f.push_back(bool_field(
      "model.optim.adam_w_mode", [](auto& c) -> auto& { return c.model.optim.adam_w_mode; }));
  f.push_back(number_field(
      "model.optim.bucket_cap_mb", [](auto& c) -> auto& { return c.model.optim.bucket_cap_mb; }));
  f.push_back(bool_field(
      "model.optim.overlap_grad_sync", [](auto& c) -> auto& { return c.model.optim.overlap_grad_sync; }));
  f.push_back(bool_field(
      "model.optim.overlap_param_sync", [](auto& c) -> auto& { return c.model.optim.overlap_param_sync; }));
  f.push_back({"model.optim.grad_sync_dtype",
               [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
                 const std::string text = read_string(v, "model.optim.grad_sync_dtype", where);
                 DType dtype = DType::f64;
                 try {
                   dtype = parse_dtype(text, "model.optim.grad_sync_dtype");
                 } catch (const Error&) {
                 }
                 if (dtype != DType::f32 && dtype != DType::bf16) {
                   fail("model.optim.grad_sync_dtype: unsupported value {}{}; use fp32 (float32) or bf16 (bfloat16)",
                        describe(v), where);
                 }
                 c.model.optim.grad_sync_dtype = dtype;
               },
               [](const TrainConfig& c) { return std::string(dtype_name(c.model.optim.grad_sync_dtype)); }});
  f.push_back(bool_field(
      "model.optim.store_param_remainders", [](auto& c) -> auto& { return c.model.optim.store_param_remainders; }));
  f.push_back(bool_field(
      "model.optim.average_grad_sync", [](auto& c) -> auto& { return c.model.optim.average_grad_sync; }));
  f.push_back(bool_field(
      "model.optim.contiguous_grad_buffer", [](auto& c) -> auto& { return c.model.optim.contiguous_grad_buffer; }));

  f.push_back(string_field(
      "model.optim.sched.name", [](auto& c) -> auto& { return c.model.optim.sched.name; }));
  f.push_back(int_field(
      "model.optim.sched.warmup_steps", [](auto& c) -> auto& { return c.model.optim.sched.warmup_steps; }));
  f.push_back(int_field(
      "model.optim.sched.constant_steps", [](auto& c) -> auto& { return c.model.optim.sched.constant_steps; }));
  f.push_back(number_field(
      "model.optim.sched.min_lr", [](auto& c) -> auto& { return c.model.optim.sched.min_lr; }));
  // null (the default) means trainer.max_steps.
  f.push_back({"model.optim.sched.max_steps",
               [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
                 c.model.optim.sched.max_steps.reset();
                 if (!v.IsNull()) c.model.optim.sched.max_steps = read_int(v, "model.optim.sched.max_steps", where);
               },
               [](const TrainConfig& c) {
                 const auto& steps = c.model.optim.sched.max_steps;
                 return steps ? fmt::format("{}", *steps) : std::string("null");
               }});

  // NeMo's exp_dir: null means "the default folder".
  f.push_back(path_field(
      "exp_manager.exp_dir", [](auto& c) -> auto& { return c.exp_manager.exp_dir; }));
  f.push_back(string_field(
      "exp_manager.name", [](auto& c) -> auto& { return c.exp_manager.name; }));
  f.push_back(bool_field(
      "exp_manager.resume_if_exists", [](auto& c) -> auto& { return c.exp_manager.resume_if_exists; }));
  f.push_back(path_field(
      "exp_manager.resume_from_checkpoint", [](auto& c) -> auto& { return c.exp_manager.resume_from_checkpoint; }));
  f.push_back(bool_field(
      "exp_manager.overwrite_existing_run", [](auto& c) -> auto& { return c.exp_manager.overwrite_existing_run; }));
  f.push_back(bool_field(
      "exp_manager.create_checkpoint_callback",
      [](auto& c) -> auto& { return c.exp_manager.create_checkpoint_callback; }));
  f.push_back(int_field(
      "exp_manager.checkpoint_callback_params.every_n_train_steps",
      [](auto& c) -> auto& { return c.exp_manager.checkpoint_callback_params.every_n_train_steps; }));
  f.push_back(int_field(
      "exp_manager.checkpoint_callback_params.save_top_k",
      [](auto& c) -> auto& { return c.exp_manager.checkpoint_callback_params.save_top_k; }));
  f.push_back(bool_field(
      "exp_manager.checkpoint_callback_params.node_local",
      [](auto& c) -> auto& { return c.exp_manager.checkpoint_callback_params.node_local; }));
  return f;
}

}  // namespace

const std::vector<FieldSpec>& config_fields() {
  static const std::vector<FieldSpec> fields = make_fields();
  return fields;
}

const FieldSpec* find_field(std::string_view path) {
  for (const auto& field : config_fields()) {
    if (field.path == path) return &field;
  }
  return nullptr;
}

}  // namespace adamant::train::detail
