#include "adamant/train/config_validate.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>
#include <system_error>

#include "adamant/core/error.h"
#include "adamant/train/config_values.h"

namespace adamant::train::detail {
namespace {

class Validator {
 public:
  Validator(const TrainConfig& config, const ConfigDocument& document) : c_(config), doc_(document) {}

  void run() const {
    check_trainer();
    check_model();
    check_optimizer();
    check_data();
    check_exp_manager();
  }

 private:
  // Where a value came from; keys not in the input keep Adamant's default.
  std::string where(std::string_view path) const {
    return doc_.raw(path) ? doc_.where(path) : std::string(" (Adamant's default)");
  }

  template <typename T>
  void at_least(std::string_view path, T value, T minimum, std::string_view meaning) const {
    if (value < minimum) {
      fail("{} must be >= {} (got {}){}; it is {}", path, minimum, value, where(path), meaning);
    }
  }
  void positive(std::string_view path, double value, std::string_view meaning) const {
    if (!(value > 0.0)) fail("{} must be > 0 (got {}){}; it is {}", path, value, where(path), meaning);
  }
  void fraction(std::string_view path, double value) const {
    if (value < 0.0 || value >= 1.0) {
      fail("{} must be in [0, 1) (got {}){}; it is a dropout probability, e.g. 0.1 (0 disables it)", path, value,
           where(path));
    }
  }
  void divisible(std::string_view path, int value, std::string_view divisor_path, int divisor) const {
    if (divisor > 0 && value % divisor != 0) {
      fail("{} ({}) must be divisible by {} ({}){}; change one of them", path, value, divisor_path, divisor,
           where(path));
    }
  }

  void check_trainer() const {
    const auto& t = c_.trainer;
    if (t.accelerator != "cpu" && t.accelerator != "gpu") {
      fail("trainer.accelerator: unknown accelerator '{}'{}; use cpu or gpu", t.accelerator,
           where("trainer.accelerator"));
    }
    at_least("trainer.devices", t.devices, 1, "the number of devices per node (NeMo's -1 is not supported)");
    at_least("trainer.num_nodes", t.num_nodes, 1, "the number of nodes");
    at_least("trainer.max_steps", t.max_steps, 1, "the number of optimizer steps to train, e.g. 1000");
    at_least("trainer.val_check_interval", t.val_check_interval, 1, "the number of steps between validations");
    at_least("trainer.limit_val_batches", t.limit_val_batches, 0, "the number of validation batches (0: none)");
    at_least("trainer.log_every_n_steps", t.log_every_n_steps, 1, "the number of steps between log lines");
    at_least("trainer.gradient_clip_val", t.gradient_clip_val, 0.0,
             "the maximum global gradient norm (0 disables clipping)");
    at_least("trainer.collective_timeout_s", t.collective_timeout_s, 0.0,
             "the seconds a rank may wait for a collective before the job ends (0: no limit)");
  }

  void check_model() const {
    const auto& m = c_.model;
    at_least("model.micro_batch_size", m.micro_batch_size, 1, "the samples per rank per micro-batch, e.g. 4");
    at_least("model.global_batch_size", m.global_batch_size, 1, "the samples per optimizer step, e.g. 256");
    divisible("model.global_batch_size", m.global_batch_size, "model.micro_batch_size", m.micro_batch_size);
    at_least("model.tensor_model_parallel_size", m.tensor_model_parallel_size, 1, "the tensor-parallel group size");
    at_least("model.encoder_seq_length", m.encoder_seq_length, 1, "the sequence length in tokens, e.g. 2048");
    at_least("model.max_position_embeddings", m.max_position_embeddings, 1, "the number of learned positions");
    if (m.encoder_seq_length > m.max_position_embeddings) {
      fail(
          "model.encoder_seq_length ({}) must be <= model.max_position_embeddings ({}){}; raise "
          "max_position_embeddings or set it to ${{model.encoder_seq_length}}",
          m.encoder_seq_length, m.max_position_embeddings, where("model.encoder_seq_length"));
    }
    at_least("model.num_layers", m.num_layers, 1, "the number of transformer layers");
    at_least("model.hidden_size", m.hidden_size, 1, "the model width");
    at_least("model.ffn_hidden_size", m.ffn_hidden_size, 1, "the MLP width, usually 4 x hidden_size");
    at_least("model.num_attention_heads", m.num_attention_heads, 1, "the number of attention heads");
    divisible("model.hidden_size", m.hidden_size, "model.num_attention_heads", m.num_attention_heads);
    divisible("model.num_attention_heads", m.num_attention_heads, "model.tensor_model_parallel_size",
              m.tensor_model_parallel_size);
    divisible("model.ffn_hidden_size", m.ffn_hidden_size, "model.tensor_model_parallel_size",
              m.tensor_model_parallel_size);
    positive("model.init_method_std", m.init_method_std, "the standard deviation of the weight init, e.g. 0.02");
    fraction("model.hidden_dropout", m.hidden_dropout);
    fraction("model.attention_dropout", m.attention_dropout);
    if (!m.activations_checkpoint_granularity.empty() && m.activations_checkpoint_granularity != "selective") {
      fail(
          "model.activations_checkpoint_granularity is '{}'{}; Adamant recomputes selectively: use selective "
          "(backward recomputes the GELU outputs instead of keeping them) or null (keep every activation)",
          m.activations_checkpoint_granularity, where("model.activations_checkpoint_granularity"));
    }
    at_least("model.make_vocab_size_divisible_by", m.make_vocab_size_divisible_by, 1,
             "the vocabulary padding multiple, e.g. 128");
    positive("model.native_amp_init_scale", m.native_amp_init_scale, "the initial fp16 loss scale, e.g. 4294967296");
    at_least("model.native_amp_growth_interval", m.native_amp_growth_interval, 1,
             "the steps without overflow before the fp16 loss scale doubles");
    at_least("model.hysteresis", m.hysteresis, 1, "the overflows tolerated before the fp16 loss scale shrinks");
    if (m.megatron_amp_O2 && c_.trainer.precision == DType::f32) {
      fail(
          "model.megatron_amp_O2=true needs half-precision weights, but trainer.precision is 32{}; set "
          "trainer.precision: bf16 (or 16), or model.megatron_amp_O2: false",
          where("model.megatron_amp_O2"));
    }
    if (m.tokenizer.library != "megatron" || m.tokenizer.type != "GPT2BPETokenizer") {
      fail(
          "model.tokenizer: Adamant implements only library 'megatron' with type 'GPT2BPETokenizer' (got '{}' / "
          "'{}'){}; set model.tokenizer.library: megatron and model.tokenizer.type: GPT2BPETokenizer",
          m.tokenizer.library, m.tokenizer.type, where("model.tokenizer.type"));
    }
  }

  void check_optimizer() const {
    const auto& o = c_.model.optim;
    if (o.name != "fused_adam" && o.name != "distributed_fused_adam") {
      fail(
          "model.optim.name: unknown optimizer '{}'{}; use one of fused_adam, distributed_fused_adam (adam and adamw "
          "are aliases of fused_adam)",
          o.name, where("model.optim.name"));
    }
    if (o.name == "distributed_fused_adam" && !c_.model.megatron_amp_O2) {
      fail(
          "model.optim.name=distributed_fused_adam requires model.megatron_amp_O2=true (bf16/fp16 model weights with "
          "fp32 main weights held by the optimizer){}; set model.megatron_amp_O2: true with trainer.precision: bf16, "
          "or use model.optim.name: fused_adam",
          where("model.optim.name"));
    }
    if (o.store_param_remainders && c_.trainer.precision != DType::bf16) {
      fail(
          "model.optim.store_param_remainders=true needs bf16 weights (the fp32 main weight is the bf16 weight plus "
          "a 16-bit remainder), but trainer.precision is {}{}; set trainer.precision: bf16 or "
          "model.optim.store_param_remainders: false",
          dtype_name(c_.trainer.precision), where("model.optim.store_param_remainders"));
    }
    positive("model.optim.lr", o.lr, "the peak learning rate, e.g. 3e-4");
    at_least("model.optim.weight_decay", o.weight_decay, 0.0, "the decoupled weight decay, e.g. 0.1");
    for (const auto& [path, beta] : {std::pair{"model.optim.betas[0]", o.beta1}, {"model.optim.betas[1]", o.beta2}}) {
      if (beta < 0.0 || beta >= 1.0) {
        fail("{} must be in [0, 1) (got {}){}; Adam's betas are e.g. [0.9, 0.95]", path, beta,
             where("model.optim.betas"));
      }
    }
    positive("model.optim.eps", o.eps, "Adam's denominator epsilon, e.g. 1e-8");
    positive("model.optim.bucket_cap_mb", o.bucket_cap_mb, "the bucket size in MiB, e.g. 100");

    const auto& s = o.sched;
    if (s.name != "CosineAnnealing" && s.name != "constant") {
      fail("model.optim.sched.name: unknown schedule '{}'{}; use CosineAnnealing or constant", s.name,
           where("model.optim.sched.name"));
    }
    at_least("model.optim.sched.warmup_steps", s.warmup_steps, 0, "the linear warmup length in steps");
    at_least("model.optim.sched.constant_steps", s.constant_steps, 0, "the steps held at min_lr after the decay");
    at_least("model.optim.sched.min_lr", s.min_lr, 0.0, "the final learning rate of the cosine decay");
    if (s.min_lr > o.lr) {
      fail("model.optim.sched.min_lr ({}) must be <= model.optim.lr ({}){}; the cosine decays from lr to min_lr",
           s.min_lr, o.lr, where("model.optim.sched.min_lr"));
    }
    if (s.max_steps) {
      at_least("model.optim.sched.max_steps", *s.max_steps, 1, "the schedule length (null: trainer.max_steps)");
    }
  }

  void check_data() const {
    const auto& d = c_.model.data;
    for (std::size_t i = 0; i < d.data_prefix.size(); ++i) {
      if (d.data_prefix[i].second.empty()) {
        fail(
            "model.data.data_prefix: dataset {} has an empty path prefix{}; give the path of the .bin/.idx pair "
            "without extension",
            i, where("model.data.data_prefix"));
      }
    }
    // Megatron's splits: up to three train/validation/test weights separated by ',' or '/'.
    const std::string& splits = d.splits_string;
    double total = 0.0;
    int parts = 0;
    std::size_t begin = 0;
    while (begin <= splits.size()) {
      std::size_t end = splits.find_first_of(",/", begin);
      if (end == std::string::npos) end = splits.size();
      const std::string_view part = std::string_view(splits).substr(begin, end - begin);
      double weight = -1.0;
      const auto [last, error] = std::from_chars(part.data(), part.data() + part.size(), weight);
      if (error != std::errc() || last != part.data() + part.size() || weight < 0.0 || ++parts > 3) {
        fail(
            "model.data.splits_string: '{}' is not a train,validation,test split{}; write up to three "
            "non-negative weights such as \"969,30,1\"",
            splits, where("model.data.splits_string"));
      }
      total += weight;
      begin = end + 1;
    }
    if (!(total > 0.0)) {
      fail("model.data.splits_string: '{}' has no positive weight{}; e.g. \"969,30,1\"", splits,
           where("model.data.splits_string"));
    }
  }

  void check_exp_manager() const {
    const auto& e = c_.exp_manager;
    if (e.exp_dir.empty()) {
      fail("exp_manager.exp_dir is empty{}; give the folder that holds the runs, e.g. runs",
           where("exp_manager.exp_dir"));
    }
    if (e.name.empty())
      fail("exp_manager.name is empty{}; give the run's name, e.g. gpt3_126m", where("exp_manager.name"));
    const auto& k = e.checkpoint_callback_params;
    at_least("exp_manager.checkpoint_callback_params.every_n_train_steps", k.every_n_train_steps, 0,
             "the steps between checkpoints (0: only at the end)");
    if (k.save_top_k == 0 || k.save_top_k < -1) {
      fail(
          "exp_manager.checkpoint_callback_params.save_top_k must be -1 (keep all) or >= 1 (got {}){}; to write no "
          "checkpoints set exp_manager.create_checkpoint_callback: false",
          k.save_top_k, where("exp_manager.checkpoint_callback_params.save_top_k"));
    }
    if (k.node_local && c_.model.optim.name != "distributed_fused_adam") {
      fail(
          "exp_manager.checkpoint_callback_params.node_local needs model.optim.name: distributed_fused_adam "
          "(got {}){}; {} writes its state from rank 0 only, which other hosts cannot read back",
          c_.model.optim.name, where("exp_manager.checkpoint_callback_params.node_local"), c_.model.optim.name);
    }
  }

  const TrainConfig& c_;
  const ConfigDocument& doc_;
};

}  // namespace

void validate_train_config(const TrainConfig& config, const ConfigDocument& document) {
  Validator(config, document).run();
}

}  // namespace adamant::train::detail
