// The keys Adamant acts on: the ONE table from NeMo YAML paths to the fields of
// the layers' option structs. Defaults and checks are the structs'; this table
// only reads, writes and explains each key. It also drives the did-you-mean
// suggestions (config_key_suggestion.cpp) and docs/config.md's key table.
#include <fmt/format.h>

#include <filesystem>
#include <type_traits>
#include <utility>

#include "adamant/core/error.h"
#include "adamant/train/config_schema.h"
#include "adamant/train/config_values.h"

namespace adamant::train::detail {
namespace {

// A key whose value is one field of TrainConfig. `access` is a generic lambda
// `[](auto& c) -> auto& { return c.x.y; }` yielding the field of a const or mutable
// TrainConfig; the field's type picks the YAML type. A null (or empty) path keeps
// the default, as NeMo files write `vocab_file: null`.
template <typename Access>
FieldSpec field(std::string path, std::string meaning, Access access, std::string derived_default = {}) {
  using T = std::remove_cvref_t<decltype(access(std::declval<TrainConfig&>()))>;
  auto read = [access, path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
    if constexpr (std::is_same_v<T, bool>) {
      access(c) = read_bool(v, path, where);
    } else if constexpr (std::is_same_v<T, int>) {
      access(c) = read_int(v, path, where);
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
      access(c) = read_int64(v, path, where);
    } else if constexpr (std::is_floating_point_v<T>) {
      access(c) = static_cast<T>(read_number(v, path, where));
    } else if constexpr (std::is_same_v<T, std::string>) {
      access(c) = read_string(v, path, where);
    } else {
      static_assert(std::is_same_v<T, std::filesystem::path>);
      const std::string text = v.IsNull() ? std::string() : read_string(v, path, where);
      const TrainConfig defaults;
      access(c) = text.empty() ? access(defaults) : std::filesystem::path(text);
    }
  };
  auto write = [access](const TrainConfig& c) -> std::string {
    const T& value = access(c);
    if constexpr (std::is_same_v<T, bool>) {
      return value ? "true" : "false";
    } else if constexpr (std::is_integral_v<T>) {
      return fmt::format("{}", value);
    } else if constexpr (std::is_floating_point_v<T>) {
      return format_number(value);
    } else if constexpr (std::is_same_v<T, std::string>) {
      return quote(value);
    } else {
      return quote(value.string());
    }
  };
  return {std::move(path), std::move(meaning), std::move(derived_default), read, write};
}

FieldSpec custom(std::string path, std::string meaning,
                 std::function<void(const YAML::Node&, const std::string&, TrainConfig&)> read,
                 std::function<std::string(const TrainConfig&)> write) {
  return {std::move(path), std::move(meaning), {}, std::move(read), std::move(write)};
}

// Lightning's devices: a count, or -1 / "auto" for the ranks the launcher started per node.
FieldSpec devices_field() {
  const std::string path = "trainer.devices";
  return custom(
      path,
      "ranks (GPUs with `gpu`) per node; `devices x num_nodes` must equal the MPI world size and every host must "
      "run `devices` ranks; -1 or `auto`: the ranks the launcher started on each host",
      [path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        if (v.IsScalar() && v.Scalar() == "auto") {
          c.trainer.devices = TrainerOptions::kAutoDevices;
        } else if (v.IsSequence() || (v.IsScalar() && v.Scalar().find(',') != std::string::npos)) {
          fail(
              "{} is {}: a list of device ids is not supported{}; Adamant runs one GPU per MPI rank, picked by the "
              "node-local rank: give the ranks per node (e.g. 8) or -1",
              path, describe(v), where);
        } else {
          c.trainer.devices = read_int(v, path, where);
        }
      },
      [](const TrainConfig& c) { return fmt::format("{}", c.trainer.devices); });
}

FieldSpec precision_field() {
  return custom(
      "trainer.precision", "`32`, `bf16` (`bf16-mixed`), `16` (`16-mixed`, dynamic loss scaling)",
      [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        c.trainer.precision = read_precision(v, "trainer.precision", where);
      },
      [](const TrainConfig& c) {
        return std::string(c.trainer.precision == DType::f32   ? "32"
                           : c.trainer.precision == DType::f16 ? "16"
                                                               : "bf16");
      });
}

FieldSpec betas_field() {
  const std::string path = "model.optim.betas";
  return custom(
      path, "Adam's `[beta1, beta2]`",
      [path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        if (!v.IsSequence() || v.size() != 2) {
          fail("{}: expected a list of two numbers [beta1, beta2], e.g. [0.9, 0.95], got {}{}", path, describe(v),
               where);
        }
        c.optim.beta1 = read_number(v[0], path + "[0]", where);
        c.optim.beta2 = read_number(v[1], path + "[1]", where);
      },
      [](const TrainConfig& c) {
        return fmt::format("[{}, {}]", format_number(c.optim.beta1), format_number(c.optim.beta2));
      });
}

// NeMo's blend syntax: [prefix], [w1, prefix1, w2, prefix2, ...] or a single string.
FieldSpec data_prefix_field() {
  const std::string path = "model.data.data_prefix";
  return custom(
      path, "`[prefix]` or `[w1, prefix1, w2, prefix2, ...]` (a blend) of `adamant preprocess` outputs",
      [path](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        auto& blend = c.data.data_prefix;
        blend.clear();
        if (v.IsNull()) return;
        if (v.IsScalar()) {
          blend.push_back({1.0, read_string(v, path, where)});
          return;
        }
        constexpr std::string_view kForms =
            "[prefix] or [weight1, prefix1, weight2, prefix2, ...], e.g. [0.7, data/web_text_document, 0.3, "
            "data/books_text_document]";
        if (!v.IsSequence()) fail("{}: expected {}, got {}{}", path, kForms, describe(v), where);
        if (v.size() == 1) {
          blend.push_back({1.0, read_string(v[0], path + "[0]", where)});
          return;
        }
        if (v.size() % 2 != 0) {
          fail("{}: a blend needs weight/prefix pairs, got {} entries{}; expected {}", path, v.size(), where, kForms);
        }
        for (std::size_t i = 0; i < v.size(); i += 2) {
          blend.push_back({read_number(v[i], fmt::format("{}[{}]", path, i), where),
                           read_string(v[i + 1], fmt::format("{}[{}]", path, i + 1), where)});
        }
      },
      [](const TrainConfig& c) {
        std::string text = "[";
        for (const auto& [weight, prefix] : c.data.data_prefix) {
          if (text.size() > 1) text += ", ";
          text += format_number(weight) + ", " + quote(prefix.string());
        }
        return text + "]";
      });
}

// A key that names an fp32 or bf16 dtype (also float32, bfloat16); `member(config)` is its field.
// Other dtype names parse here and are refused by the layer's validate(), with the same fix.
template <typename Member>
FieldSpec fp32_or_bf16_field(const std::string& path, const std::string& help, Member member) {
  return custom(
      path, help,
      [path, member](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        const std::string text = read_string(v, path, where);
        try {
          member(c) = parse_dtype(text, path);
        } catch (const Error&) {
          fail("{}: unsupported value {}{}; use fp32 (float32) or bf16 (bfloat16)", path, describe(v), where);
        }
      },
      [member](const TrainConfig& c) { return std::string(dtype_name(member(c))); });
}

FieldSpec grad_sync_dtype_field() {
  return fp32_or_bf16_field(
      "model.optim.grad_sync_dtype",
      "`fp32`, or `bf16` to halve the gradient traffic (`distributed_fused_adam`). On a GPU the gradients also "
      "accumulate in this dtype, as Apex's buckets and Megatron's buffers without `grad_reduce_in_fp32` do: the "
      "model's gradient buffer is bf16 (half its memory), the weight-gradient GEMMs write it, the sync sends it as it "
      "is, and the norm and Adam read 2 bytes a weight instead of 4; a CPU run keeps fp32 gradients and sends a bf16 "
      "copy (a single data-parallel rank sends nothing and keeps its fp32 gradients there)",
      [](auto& c) -> auto& { return c.optim.grad_sync_dtype; });
}

FieldSpec classifier_logits_dtype_field() {
  return fp32_or_bf16_field(
      "model.classifier_logits_dtype",
      "GPU: what the classifier's logits GEMM writes, `fp32` or `bf16` (as Megatron's bf16 output layer: the "
      "logits rounded to bf16, half the bytes written and read by the cross-entropy, whose sums stay fp32; GPT-3 "
      "126M trains 1.4% faster on an H200). The shipped GPU configs set `bf16`. The CPU computes them in fp32 (fp64) "
      "either way",
      [](auto& c) -> auto& { return c.model.classifier_logits; });
}

std::vector<FieldSpec> make_fields() {
  std::vector<FieldSpec> f;
  f.push_back(field(
      "trainer.accelerator", "`cpu` or `gpu` (one GPU per MPI rank, by node-local rank)",
      [](auto& c) -> auto& { return c.trainer.accelerator; }));
  f.push_back(devices_field());
  f.push_back(field(
      "trainer.num_nodes", "hosts the job runs on; must equal the hosts the launcher used",
      [](auto& c) -> auto& { return c.trainer.num_nodes; }));
  f.push_back(precision_field());
  f.push_back(field(
      "trainer.max_steps", "optimizer steps", [](auto& c) -> auto& { return c.trainer.max_steps; }));
  f.push_back(field(
      "trainer.val_check_interval", "validate every N steps (and at the end)",
      [](auto& c) -> auto& { return c.trainer.val_check_interval; }));
  f.push_back(field(
      "trainer.limit_val_batches", "global batches of the validation split per validation",
      [](auto& c) -> auto& { return c.trainer.limit_val_batches; }));
  f.push_back(field(
      "trainer.log_every_n_steps", "progress line every N steps (metrics.jsonl gets every step)",
      [](auto& c) -> auto& { return c.trainer.log_every_n_steps; }));
  // Lightning's gradient_clip_val: null means no clipping, as 0 does.
  f.push_back(custom(
      "trainer.gradient_clip_val", "clip by global L2 norm; 0 or null disables",
      [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        c.optim.gradient_clip_val = v.IsNull() ? 0.0 : read_number(v, "trainer.gradient_clip_val", where);
      },
      [](const TrainConfig& c) { return format_number(c.optim.gradient_clip_val); }));
  f.push_back(field(
      "trainer.collective_timeout_s",
      "a rank waiting longer than this for a collective ends the job, naming itself, its host and the "
      "collective (`docs/multinode.md`); 0: no limit",
      [](auto& c) -> auto& { return c.trainer.collective_timeout_s; }));
  f.push_back(field(
      "trainer.allow_irregular_node_layout",
      "accept tensor-parallel groups that span hosts and hosts with unequal numbers of ranks (refused "
      "otherwise: `docs/multinode.md`)",
      [](auto& c) -> auto& { return c.trainer.allow_irregular_node_layout; }));
  f.push_back(field(
      "trainer.matmul_algorithms",
      "a table of cuBLASLt algorithms recorded by `adamant tune-matmul`, relative to the working folder: the "
      "GEMMs it has a choice for on this GPU and cuBLASLt version use it, the others cuBLASLt's heuristics "
      "(`docs/architecture.md`, \"Recorded GEMM algorithms\"); empty: the heuristics for all",
      [](auto& c) -> auto& { return c.trainer.matmul_algorithms; }));

  f.push_back(field(
      "model.micro_batch_size", "samples per rank per micro-batch",
      [](auto& c) -> auto& { return c.data.micro_batch_size; }));
  f.push_back(field(
      "model.global_batch_size",
      "samples per optimizer step; gradient accumulation = global / (micro x data-parallel size)",
      [](auto& c) -> auto& { return c.data.global_batch_size; }));
  f.push_back(field(
      "model.tensor_model_parallel_size",
      "Megatron tensor parallelism: heads, MLP columns and vocabulary rows split over this many "
      "adjacent ranks; must divide the world size, the heads and the ffn size",
      [](auto& c) -> auto& { return c.model.tensor_parallel_size; }));
  f.push_back(field(
      "model.sequence_parallel",
      "with tensor parallelism: the residual stream, layernorms and dropout on 1/tp of the tokens "
      "(needs `encoder_seq_length` divisible by tp)",
      [](auto& c) -> auto& { return c.model.sequence_parallel; }));
  f.push_back(field(
      "model.pipeline_model_parallel_size",
      "pipeline stages: the layers split into this many consecutive blocks (embedding on the first, classifier "
      "on the last), run by the 1F1B schedule; tp x pp must divide the world size",
      [](auto& c) -> auto& { return c.model.pipeline_parallel_size; }));
  // NeMo writes null for no interleaving; Adamant holds it as 1 chunk per stage.
  f.push_back(custom(
      "model.virtual_pipeline_model_parallel_size",
      "model chunks per pipeline stage (interleaved schedule, bubble / chunks); null: 1",
      [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        c.model.virtual_pipeline_size =
            v.IsNull() ? 1 : read_int(v, "model.virtual_pipeline_model_parallel_size", where);
      },
      [](const TrainConfig& c) {
        return c.model.virtual_pipeline_size == 1 ? std::string("null")
                                                  : fmt::format("{}", c.model.virtual_pipeline_size);
      }));
  f.push_back(field(
      "model.megatron_amp_O2", "bf16/fp16 model weights with fp32 main weights in the optimizer",
      [](auto& c) -> auto& { return c.optim.megatron_amp_O2; }));
  f.push_back(field(
      "model.encoder_seq_length", "sequence length in tokens", [](auto& c) -> auto& { return c.model.seq_length; }));
  f.push_back(field(
      "model.max_position_embeddings", "position table size; at least `encoder_seq_length`",
      [](auto& c) -> auto& { return c.model.max_position_embeddings; }, "`model.encoder_seq_length`"));
  f.push_back(field(
      "model.num_layers", "transformer layers", [](auto& c) -> auto& { return c.model.num_layers; }));
  f.push_back(field(
      "model.hidden_size", "model width", [](auto& c) -> auto& { return c.model.hidden_size; }));
  f.push_back(field(
      "model.ffn_hidden_size", "MLP width", [](auto& c) -> auto& { return c.model.ffn_hidden_size; },
      "4 x `model.hidden_size`"));
  f.push_back(field(
      "model.num_attention_heads", "attention heads; must divide `hidden_size`",
      [](auto& c) -> auto& { return c.model.num_attention_heads; }));
  f.push_back(field(
      "model.init_method_std", "init std; output projections use std / sqrt(2 x layers)",
      [](auto& c) -> auto& { return c.model.init_method_std; }));
  f.push_back(field(
      "model.openai_gelu",
      "GPT-2's tanh approximation of GELU (Hugging Face `gelu_new`) instead of the exact erf form (`gelu`)",
      [](auto& c) -> auto& { return c.model.openai_gelu; }));
  f.push_back(field(
      "model.bias_activation_fusion",
      "NeMo's fused bias + GELU kernel, which computes GELU's tanh approximation: `true` (NeMo's config template "
      "sets it) trains with that form, as NeMo does, whatever `model.openai_gelu` says, and on a GPU runs the MLP's "
      "bias and GELU inside the up projection's GEMM (cuBLASLt's GELU_AUX_BIAS epilogue) and the GELU's gradient "
      "inside the down projection's data-gradient GEMM (DGELU); `false` leaves the form to `model.openai_gelu`, "
      "computed by separate kernels. With `activations_checkpoint_granularity: selective` the kernels stay separate",
      [](auto& c) -> auto& { return c.model.bias_activation_fusion; }));
  f.push_back(field(
      "model.restore_from_path",
      "start from these weights: a Hugging Face GPT-2 folder (`model.safetensors`, `config.json`; "
      "`docs/huggingface.md`) or an Adamant checkpoint folder; any optimizer and parallel layout. The "
      "optimizer starts fresh at step 0; a checkpoint found by `exp_manager.resume_if_exists` takes "
      "precedence",
      [](auto& c) -> auto& { return c.trainer.restore_from_path; }));
  f.push_back(field(
      "model.hidden_dropout",
      "dropout after the attention and MLP outputs; masks depend only on (seed, sample index), not "
      "on the data-parallel size",
      [](auto& c) -> auto& { return c.model.hidden_dropout; }));
  f.push_back(field(
      "model.attention_dropout",
      "dropout of the attention probabilities, inside the attention kernels (no mask is stored; backward "
      "regenerates it); 8 random bits per element from seven-round Philox4x32, so the probability resolves to 1/256 "
      "(ceil(256 p) / 256, at most 255/256; kept elements are scaled by 1 over the resolved keep probability)",
      [](auto& c) -> auto& { return c.model.attention_dropout; }));
  f.push_back(custom(
      "model.activations_checkpoint_granularity",
      "`selective`: backward recomputes each layer's GELU output (4 x hidden per token, the largest activation) "
      "instead of keeping it; one buffer serves every layer. Saves (layers - 1) x tokens x 4 x hidden activations "
      "(3.1 GB for GPT-3 1.3B at micro-batch 4) for one more write per layer: the GELU backward, which reads the "
      "pre-activations anyway, writes the output back. `full` is refused",
      [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        const std::string path = "model.activations_checkpoint_granularity";
        const std::string value = v.IsNull() ? std::string() : read_string(v, path, where);
        if (!value.empty() && value != "selective") {
          fail(
              "{} is '{}'{}; Adamant recomputes selectively: use selective (backward recomputes the GELU outputs "
              "instead of keeping them) or null (keep every activation)",
              path, value, where);
        }
        c.model.recompute_activation = value == "selective";
      },
      [](const TrainConfig& c) { return std::string(c.model.recompute_activation ? "selective" : "null"); }));
  f.push_back(field(
      "model.enable_cuda_graph",
      "GPU: each training pass (forward or backward of a micro-batch) runs as CUDA graphs recorded on its second "
      "run: a few launches instead of hundreds, the same kernels and results. With data parallelism the last "
      "backward of a step is recorded in stretches between its finished gradients, so that the buckets' "
      "reduce-scatters still start during it. With `model.tensor_model_parallel_size` above 1 the passes run directly",
      [](auto& c) -> auto& { return c.model.cuda_graph; }));
  f.push_back(classifier_logits_dtype_field());
  f.push_back(field(
      "model.make_vocab_size_divisible_by",
      "vocabulary padding to a multiple of this x tensor-parallel size (50257 -> 50304; 50432 at tp 2)",
      [](auto& c) -> auto& { return c.model.make_vocab_size_divisible_by; }));
  f.push_back(field(
      "model.seed", "weights, data shuffling, dropout; in [0, 2^32)", [](auto& c) -> auto& { return c.trainer.seed; }));
  f.push_back(field(
      "model.native_amp_init_scale", "fp16 dynamic loss scaling: the initial scale",
      [](auto& c) -> auto& { return c.optim.initial_loss_scale; }));
  f.push_back(field(
      "model.native_amp_growth_interval", "fp16: steps without overflow before the loss scale doubles",
      [](auto& c) -> auto& { return c.optim.loss_scale_growth_interval; }));
  f.push_back(field(
      "model.hysteresis", "fp16: overflows tolerated before the loss scale halves",
      [](auto& c) -> auto& { return c.optim.hysteresis; }));

  f.push_back(field(
      "model.tokenizer.library", "`megatron` (the only one)",
      [](auto& c) -> auto& { return c.data.tokenizer.library; }));
  f.push_back(field(
      "model.tokenizer.type", "`GPT2BPETokenizer` (the only one)",
      [](auto& c) -> auto& { return c.data.tokenizer.type; }));
  f.push_back(field(
      "model.tokenizer.vocab_file", "GPT-2 BPE `encoder.json`, relative to the working folder",
      [](auto& c) -> auto& { return c.data.tokenizer.vocab_file; }));
  f.push_back(field(
      "model.tokenizer.merge_file", "GPT-2 BPE `vocab.bpe` (merges)",
      [](auto& c) -> auto& { return c.data.tokenizer.merge_file; }));

  f.push_back(data_prefix_field());
  f.push_back(field(
      "model.data.splits_string", "train, validation, test weights of the documents",
      [](auto& c) -> auto& { return c.data.splits_string; }));
  f.push_back(field(
      "model.data.index_mapping_dir",
      "a folder for the datasets' index arrays (document order, sample starts, shuffle): rank 0 "
      "builds and saves them once, every rank and later run maps the file, and a machine's ranks "
      "share one copy in memory; checksummed, rebuilt when damaged or made for other data; empty: "
      "built in memory by each rank",
      [](auto& c) -> auto& { return c.data.index_mapping_dir; }));

  f.push_back(field(
      "model.optim.name",
      "`fused_adam` (aliases `adam`: L2 decay, `adamw`) or `distributed_fused_adam` (needs "
      "`model.megatron_amp_O2`)",
      [](auto& c) -> auto& { return c.optim.name; }));
  f.push_back(field(
      "model.optim.lr", "peak learning rate", [](auto& c) -> auto& { return c.sched.lr; }));
  f.push_back(field(
      "model.optim.weight_decay", "Adam's weight decay; none on biases and layernorm weights",
      [](auto& c) -> auto& { return c.optim.weight_decay; }));
  f.push_back(betas_field());
  f.push_back(field(
      "model.optim.eps", "Adam's epsilon", [](auto& c) -> auto& { return c.optim.eps; }));
  f.push_back(field(
      "model.optim.adam_w_mode", "decoupled weight decay (AdamW); false: L2 decay in the gradient",
      [](auto& c) -> auto& { return c.optim.adam_w_mode; }));
  f.push_back(field(
      "model.optim.bucket_cap_mb", "gradient bucket size (MiB of gradients at the sync dtype)",
      [](auto& c) -> auto& { return c.optim.bucket_cap_mb; }));
  f.push_back(field(
      "model.optim.overlap_grad_sync", "reduce-scatter each bucket as soon as backward finishes it",
      [](auto& c) -> auto& { return c.optim.overlap_grad_sync; }));
  f.push_back(field(
      "model.optim.overlap_param_sync",
      "wait for each bucket's weight all-gather in the next forward, right before its first weight is read",
      [](auto& c) -> auto& { return c.optim.overlap_param_sync; }));
  f.push_back(grad_sync_dtype_field());
  f.push_back(field(
      "model.optim.store_param_remainders",
      "keep 16-bit remainders instead of fp32 main weights (bf16 with `distributed_fused_adam`)",
      [](auto& c) -> auto& { return c.optim.store_param_remainders; }));
  f.push_back(field(
      "model.optim.update_sms",
      "with `overlap_param_sync` and `store_param_remainders` on a GPU, the SMs Adam runs on beside the next forward; "
      "0: every SM",
      [](auto& c) -> auto& { return c.optim.update_sms; }));
  f.push_back(field(
      "model.optim.average_grad_sync", "mean (true) or sum of per-rank means (false)",
      [](auto& c) -> auto& { return c.optim.average_grad_sync; }));

  f.push_back(field(
      "model.optim.sched.name", "`CosineAnnealing` or `constant`", [](auto& c) -> auto& { return c.sched.name; }));
  f.push_back(field(
      "model.optim.sched.warmup_steps", "linear warmup steps", [](auto& c) -> auto& { return c.sched.warmup_steps; }));
  f.push_back(field(
      "model.optim.sched.constant_steps", "steps held at `min_lr` after the decay (NeMo's formula)",
      [](auto& c) -> auto& { return c.sched.constant_steps; }));
  f.push_back(field(
      "model.optim.sched.min_lr", "the learning rate the cosine decays to",
      [](auto& c) -> auto& { return c.sched.min_lr; }));
  // null (the default) means trainer.max_steps; the schedule holds it as 0.
  f.push_back(custom(
      "model.optim.sched.max_steps", "schedule length; null: `trainer.max_steps`",
      [](const YAML::Node& v, const std::string& where, TrainConfig& c) {
        c.sched.max_steps = v.IsNull() ? 0 : read_int64(v, "model.optim.sched.max_steps", where);
      },
      [](const TrainConfig& c) {
        return c.sched.max_steps == 0 ? std::string("null") : fmt::format("{}", c.sched.max_steps);
      }));

  f.push_back(field(
      "exp_manager.exp_dir", "the folder of the runs; the run folder is `exp_dir/name`",
      [](auto& c) -> auto& { return c.exp_manager.exp_dir; }));
  f.push_back(field(
      "exp_manager.name", "the run's name", [](auto& c) -> auto& { return c.exp_manager.name; }));
  f.push_back(field(
      "exp_manager.resume_if_exists",
      "continue the run in the run folder: from the checkpoint `checkpoints/latest` names, or, when "
      "that one is missing or damaged, the newest intact one (with a warning)",
      [](auto& c) -> auto& { return c.exp_manager.resume_if_exists; }));
  f.push_back(field(
      "exp_manager.resume_from_checkpoint",
      "a checkpoint folder to continue from (e.g. `runs/a/checkpoints/step_00000100`), before "
      "`resume_if_exists`; it must be intact. A checkpoint of another run folder starts a run of its "
      "own here",
      [](auto& c) -> auto& { return c.exp_manager.resume_from_checkpoint; }));
  f.push_back(field(
      "exp_manager.overwrite_existing_run",
      "a fresh run (not resuming) in a folder that holds another run's checkpoints refuses to start; "
      "true deletes those checkpoints first",
      [](auto& c) -> auto& { return c.exp_manager.overwrite_existing_run; }));
  f.push_back(field(
      "exp_manager.create_checkpoint_callback", "write checkpoints",
      [](auto& c) -> auto& { return c.exp_manager.create_checkpoint_callback; }));
  f.push_back(field(
      "exp_manager.checkpoint_callback_params.every_n_train_steps",
      "checkpoint every N steps (and at the end); 0: only at the end",
      [](auto& c) -> auto& { return c.exp_manager.checkpoint_callback_params.every_n_train_steps; }));
  f.push_back(field(
      "exp_manager.checkpoint_callback_params.save_top_k",
      "keep this run's newest K checkpoints (-1: all); another run's are never deleted",
      [](auto& c) -> auto& { return c.exp_manager.checkpoint_callback_params.save_top_k; }));
  f.push_back(field(
      "exp_manager.checkpoint_callback_params.node_local",
      "`exp_dir` is on each host's own disk: each host writes its ranks' optimizer shards and a copy "
      "of the model, and resumes on the same hosts and layout (`docs/multinode.md`); needs "
      "`distributed_fused_adam`",
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
