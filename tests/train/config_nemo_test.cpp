// Training config: NeMo compatibility, the shipped configs, and the to_yaml round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/core/file_read.h"
#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/train/train_config.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// An excerpt of NeMo's examples/nlp/language_modeling/conf/megatron_gpt_config.yaml as
// users carry it (written from the structure of that file, with a data prefix filled in).
constexpr const char* kNemoConfig = R"yaml(
defaults:
  - _self_
  - optional tp_overlap@model.ub_tp_comm_overlap_cfg:

name: megatron_gpt
restore_from_path: null

trainer:
  devices: 1
  num_nodes: 1
  accelerator: gpu
  precision: bf16
  logger: False
  enable_checkpointing: False
  use_distributed_sampler: False
  max_epochs: -1
  max_steps: 100000
  log_every_n_steps: 10
  val_check_interval: 100
  limit_val_batches: 50
  limit_test_batches: 500
  accumulate_grad_batches: 1
  gradient_clip_val: 1.0
  benchmark: False
  enable_model_summary: False

exp_manager:
  explicit_log_dir: null
  exp_dir: null
  name: ${name}
  create_wandb_logger: False
  wandb_logger_kwargs:
    project: null
    name: null
  resume_if_exists: True
  resume_ignore_no_checkpoint: True
  resume_from_checkpoint: ${model.resume_from_checkpoint}
  create_checkpoint_callback: True
  checkpoint_callback_params:
    monitor: val_loss
    save_top_k: 10
    mode: min
    always_save_nemo: False
    save_nemo_on_train_end: False
    filename: 'megatron_gpt--{val_loss:.2f}-{step}-{consumed_samples}'
    model_parallel_size: ${multiply:${model.tensor_model_parallel_size}, ${model.pipeline_model_parallel_size}}
  log_step_timing: True
  step_timing_kwargs:
    sync_cuda: True
    buffer_size: 5

model:
  mcore_gpt: True
  micro_batch_size: 4
  global_batch_size: 8
  rampup_batch_size: null
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  virtual_pipeline_model_parallel_size: null
  encoder_seq_length: 512
  max_position_embeddings: ${.encoder_seq_length}
  num_layers: 12
  hidden_size: 768
  ffn_hidden_size: 3072
  num_attention_heads: 12
  init_method_std: 0.02
  use_scaled_init_method: True
  hidden_dropout: 0.1
  attention_dropout: 0.1
  ffn_dropout: 0.0
  kv_channels: null
  apply_query_key_layer_scaling: False
  normalization: 'layernorm'
  layernorm_epsilon: 1e-5
  do_layer_norm_weight_decay: False
  make_vocab_size_divisible_by: 128
  pre_process: True
  post_process: True
  persist_layer_norm: True
  bias: True
  activation: 'gelu'
  headscale: False
  transformer_block_type: 'pre_ln'
  openai_gelu: False
  normalize_attention_scores: True
  position_embedding_type: 'learned_absolute'
  rotary_percentage: 1.0
  attention_type: 'multihead'
  share_embeddings_and_output_weights: True
  num_query_groups: null

  tokenizer:
    library: 'megatron'
    type: 'GPT2BPETokenizer'
    model: null
    vocab_file: null
    merge_file: null
    delimiter: null
    sentencepiece_legacy: False

  native_amp_init_scale: 4294967296
  native_amp_growth_interval: 1000
  hysteresis: 2
  fp32_residual_connection: False
  fp16_lm_cross_entropy: False

  megatron_amp_O2: False
  grad_allreduce_chunk_size_mb: 125
  grad_div_ar_fusion: True
  gradient_accumulation_fusion: False
  bias_activation_fusion: True
  bias_dropout_add_fusion: True
  masked_softmax_fusion: True
  seed: 1234
  resume_from_checkpoint: null
  use_cpu_initialization: False
  onnx_safe: False
  apex_transformer_log_level: 30
  gradient_as_bucket_view: True
  sync_batch_comm: False
  activations_checkpoint_granularity: null
  activations_checkpoint_method: null
  activations_checkpoint_num_layers: null
  sequence_parallel: False
  transformer_engine: False
  fp8: False
  fp8_e4m3: False
  fp8_hybrid: True
  fp8_margin: 0
  fp8_interval: 1
  fp8_amax_history_len: 1024
  fp8_amax_compute_algo: max
  use_flash_attention: False

  data:
    data_prefix: [1.0, /data/pile/pile_text_document]
    index_mapping_dir: null
    data_impl: mmap
    splits_string: 900,50,50
    seq_length: ${model.encoder_seq_length}
    skip_warmup: True
    num_workers: 2
    dataloader_type: single
    reset_position_ids: False
    reset_attention_mask: False
    eod_mask_loss: False
    validation_drop_last: True
    no_seqlen_plus_one_input_tokens: False
    pad_samples_to_global_batch_size: False
    shuffle_documents: True

  nsys_profile:
    enabled: False
    start_step: 10
    end_step: 10
    ranks: [0]
    gen_shape: False

  optim:
    name: fused_adam
    lr: 2e-4
    weight_decay: 0.01
    betas:
    - 0.9
    - 0.98
    sched:
      name: CosineAnnealing
      warmup_steps: 500
      constant_steps: 50000
      min_lr: 2e-5

  gc_interval: 0
  precision: ${trainer.precision}
)yaml";

TEST(ConfigNemo, MegatronGptConfigCarriesOverWithOneWarningLine) {
  const TrainConfig config = parse_train_config(kNemoConfig, {}, "megatron_gpt_config.yaml");
  EXPECT_EQ(config.trainer.accelerator, "gpu");
  EXPECT_EQ(config.trainer.precision, DType::bf16);
  EXPECT_EQ(config.trainer.max_steps, 100000);
  EXPECT_EQ(config.model.seq_length, 512);
  EXPECT_EQ(config.model.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(config.optim.beta2, 0.98);
  EXPECT_DOUBLE_EQ(config.sched.min_lr, 2e-5);
  EXPECT_EQ(config.sched.constant_steps, 50000);
  EXPECT_EQ(config.data.splits_string, "900,50,50");
  EXPECT_EQ(config.data.data_prefix, (std::vector<data::WeightedPrefix>{{1.0, "/data/pile/pile_text_document"}}));
  EXPECT_EQ(config.exp_manager.name, "megatron_gpt");
  EXPECT_EQ(config.exp_manager.exp_dir, "runs");  // null: Adamant's default folder
  EXPECT_EQ(config.exp_manager.checkpoint_callback_params.save_top_k, 10);
  EXPECT_DOUBLE_EQ(config.optim.initial_loss_scale, 4294967296.0);
  EXPECT_EQ(config.data.tokenizer.vocab_file, ".cache/data/gpt2/encoder.json");
  // bias_activation_fusion: True with openai_gelu: False is NeMo's fused bias-GELU, its tanh form.
  EXPECT_EQ(config.model.gelu(), kernels::GeluForm::tanh);
  EXPECT_THAT(config.ignored_keys, ::testing::Not(::testing::Contains("model.bias_activation_fusion")));

  for (const char* key :
       {"defaults", "name", "trainer.logger", "trainer.max_epochs", "trainer.accumulate_grad_batches",
        "model.nsys_profile", "model.data.num_workers", "model.position_embedding_type",
        "exp_manager.checkpoint_callback_params.model_parallel_size", "exp_manager.wandb_logger_kwargs"}) {
    EXPECT_THAT(config.ignored_keys, ::testing::Contains(key));
  }
  EXPECT_TRUE(std::is_sorted(config.ignored_keys.begin(), config.ignored_keys.end()));
  const std::string warning = ignored_keys_warning(config);
  EXPECT_THAT(warning,
              HasSubstr(std::to_string(config.ignored_keys.size()) + " NeMo config key(s) accepted but not "
                                                                     "used by Adamant: defaults, exp_manager."));
  EXPECT_THAT(warning, HasSubstr("trainer.logger"));
  EXPECT_EQ(warning.find('\n'), std::string::npos);
}

TEST(ConfigNemo, DistributedFusedAdamOverrideOnANemoConfig) {
  const TrainConfig config =
      parse_train_config(kNemoConfig,
                         {"model.megatron_amp_O2=True", "model.optim.name=distributed_fused_adam",
                          "+model.optim.bucket_cap_mb=200", "+model.optim.overlap_param_sync=true",
                          "+model.optim.grad_sync_dtype=bf16", "+model.optim.contiguous_param_buffer=true"},
                         "megatron_gpt_config.yaml");
  EXPECT_EQ(config.optim.name, "distributed_fused_adam");
  EXPECT_DOUBLE_EQ(config.optim.bucket_cap_mb, 200.0);
  EXPECT_EQ(config.optim.grad_sync_dtype, DType::bf16);
  EXPECT_THAT(config.ignored_keys, ::testing::Contains("model.optim.contiguous_param_buffer"));
}

// Keys whose value would change the maths in a way Adamant does not implement.
TEST(ConfigNemo, UnsupportedModelVariantsAreErrorsNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"model.position_embedding_type=rope",
       "model.position_embedding_type: Adamant implements only the position "
       "embedding 'learned_absolute' (got 'rope')"},
      {"model.normalization=rmsnorm", "model.normalization: Adamant implements only normalization 'layernorm'"},
      {"model.activation=swiglu", "model.activation: Adamant implements only the activation 'gelu'"},
      {"model.share_embeddings_and_output_weights=false", "model.share_embeddings_and_output_weights: an untied"},
      {"model.bias=false", "model.bias: a model without biases is not supported"},
      {"trainer.accumulate_grad_batches=4", "trainer.accumulate_grad_batches: Lightning gradient accumulation"},
      {"trainer.max_epochs=3", "trainer.max_epochs: Adamant stops only at trainer.max_steps"},
      {"model.context_parallel_size=2", "model.context_parallel_size: context parallelism"},
      {"model.layernorm_epsilon=1e-6", "model.layernorm_epsilon: Adamant's layernorm epsilon is fixed at 1e-05"},
      {"model.data.seq_length=1024", "model.data.seq_length (1024) differs from model.encoder_seq_length (512)"},
      {"model.num_query_groups=4", "model.num_query_groups: grouped-query attention is not supported"},
      {"model.data.reset_position_ids=true", "model.data.reset_position_ids: restarting position ids"},
      {"model.resume_from_checkpoint=/ckpt/x.ckpt",
       "model.resume_from_checkpoint: resuming from a NeMo checkpoint path"},
      {"+model.optim.sched.warmup_ratio=0.1", "model.optim.sched.warmup_ratio: warmup as a ratio"},
  };
  for (const auto& [override_text, expected] : cases) {
    try {
      parse_train_config(kNemoConfig, {override_text}, "megatron_gpt_config.yaml");
      ADD_FAILURE() << "no error for " << override_text;
    } catch (const Error& error) {
      EXPECT_THAT(std::string(error.what()), HasSubstr(expected)) << override_text;
      EXPECT_THAT(std::string(error.what()), HasSubstr("(from override '" + override_text + "')"));
    }
  }
  // Pipeline parallelism is NeMo's keys; a null virtual size is one chunk per stage.
  const auto piped = parse_train_config(kNemoConfig, {"model.pipeline_model_parallel_size=2"});
  EXPECT_EQ(piped.model.pipeline_parallel_size, 2);
  EXPECT_EQ(piped.model.virtual_pipeline_size, 1);
  EXPECT_EQ(parse_train_config(kNemoConfig,
                               {"model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2"})
                .model.virtual_pipeline_size,
            2);
  try {
    parse_train_config(kNemoConfig, {"model.virtual_pipeline_model_parallel_size=2"});
    ADD_FAILURE() << "chunks without pipeline stages accepted";
  } catch (const Error& error) {
    EXPECT_THAT(std::string(error.what()), HasSubstr("model.pipeline_model_parallel_size is 1"));
  }
  // exp_manager.resume_from_checkpoint names the checkpoint folder to continue from.
  EXPECT_EQ(parse_train_config(kNemoConfig, {}).exp_manager.resume_from_checkpoint, std::filesystem::path());
  EXPECT_EQ(parse_train_config(kNemoConfig, {"exp_manager.resume_from_checkpoint=runs/a/checkpoints/step_00000004"})
                .exp_manager.resume_from_checkpoint,
            std::filesystem::path("runs/a/checkpoints/step_00000004"));
  // Recognised keys accepted with any value.
  EXPECT_NO_THROW(parse_train_config(kNemoConfig, {"model.nsys_profile.enabled=true", "model.data.num_workers=8"}));
}

TEST(ConfigNemo, EveryShippedConfigLoads) {
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ADAMANT_CONFIGS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    TrainConfig config;
    ASSERT_NO_THROW(config = load_train_config(entry.path(), {}));
    EXPECT_TRUE(config.ignored_keys.empty()) << ignored_keys_warning(config);
    EXPECT_EQ(parse_train_config(to_yaml(config), {}), config);
    ++loaded;
  }
  EXPECT_GE(loaded, 2);
}

// The GEMM tables the shipped configs name (trainer.matmul_algorithms, a path from the
// repository's root) parse, are written as `adamant tune-matmul` writes them (so that
// recording more choices into one changes only those lines), and hold choices for the
// GPUs they were recorded on.
TEST(ConfigNemo, ShippedMatmulTablesParseAndCoverTheirGpus) {
  const std::filesystem::path root = std::filesystem::path(ADAMANT_CONFIGS_DIR).parent_path();
  std::set<std::filesystem::path> tables;
  for (const auto& entry : std::filesystem::directory_iterator(ADAMANT_CONFIGS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    const TrainConfig config = load_train_config(entry.path(), {});
    if (!config.trainer.matmul_algorithms.empty()) tables.insert(root / config.trainer.matmul_algorithms);
  }
  ASSERT_FALSE(tables.empty());
  for (const std::filesystem::path& path : tables) {
    SCOPED_TRACE(path.string());
    kernels::MatmulAlgorithmTable table;
    ASSERT_NO_THROW(table = kernels::MatmulAlgorithmTable::read(path));
    EXPECT_EQ(table.to_text(), read_text_file(path, "the GEMM table"));
    std::set<std::string> gpus;
    for (const kernels::MatmulAlgorithmRecord& record : table.records()) gpus.insert(record.target.gpu);
    EXPECT_THAT(gpus, testing::IsSupersetOf({"NVIDIA_H200/sm_90/132", "NVIDIA_H100_80GB_HBM3/sm_90/132"}));
  }
}

TEST(ConfigNemo, Gpt3SizesMatchTheDesign) {
  const std::filesystem::path dir = ADAMANT_CONFIGS_DIR;
  const TrainConfig small = load_train_config(dir / "gpt3-126m.yaml", {});
  const TrainConfig xl = load_train_config(dir / "gpt3-1.3b.yaml", {});
  for (const TrainConfig* config : {&small, &xl}) {
    EXPECT_EQ(config->model.seq_length, 2048);
    EXPECT_EQ(config->model.max_position_embeddings, 2048);
    EXPECT_EQ(config->optim.name, "distributed_fused_adam");
    EXPECT_TRUE(config->optim.megatron_amp_O2);
    EXPECT_EQ(config->trainer.precision, DType::bf16);
    EXPECT_EQ(config->trainer.accelerator, "gpu");
    EXPECT_EQ(config->model.ffn_hidden_size, 4 * config->model.hidden_size);
  }
  EXPECT_EQ(std::tuple(small.model.num_layers, small.model.hidden_size, small.model.num_attention_heads),
            std::tuple(12, 768, 12));
  EXPECT_EQ(std::tuple(xl.model.num_layers, xl.model.hidden_size, xl.model.num_attention_heads),
            std::tuple(24, 2048, 16));
  EXPECT_EQ(small.run_dir(), std::filesystem::path("runs/gpt3_126m"));
  // Both keep every activation; 1.3B's gradients accumulate in bf16 (its grad_sync_dtype), which
  // leaves room for them on one GPU.
  EXPECT_FALSE(small.model.recompute_activation);
  EXPECT_FALSE(xl.model.recompute_activation);
  EXPECT_EQ(xl.model.grad_buffer, DType::bf16);
}

TEST(ConfigRoundTrip, ToYamlThenParseGivesTheSameConfig) {
  TrainConfig config = parse_train_config(kNemoConfig, {"model.megatron_amp_O2=true", "trainer.precision=16"});
  // Values that stress the writer: awkward strings, a blend, non-default numbers everywhere.
  config.trainer.accelerator = "cpu";
  config.optim.gradient_clip_val = 0.0;
  config.data.data_prefix = {{0.25, "data/a b: c"}, {1e-3, "data/\"quoted\"#x"}, {3.0, "null"}};
  config.data.index_mapping_dir = "/tmp/index maps";
  config.sched.lr = 1.0 / 3.0;
  config.optim.eps = 1e-15;
  config.optim.name = "distributed_fused_adam";
  config.optim.grad_sync_dtype = DType::bf16;
  config.model.grad_buffer = DType::bf16;  // derived from grad_sync_dtype, not a key of its own
  config.optim.adam_w_mode = false;
  config.optim.average_grad_sync = false;
  config.sched = {"constant", 1.0 / 3.0, 7, 3, 1e-7, 123};
  config.trainer.seed = 4294967295LL;
  config.exp_manager.name = "true";
  config.exp_manager.checkpoint_callback_params = {25, -1};
  const std::string yaml = to_yaml(config);
  const TrainConfig again = parse_train_config(yaml, {}, "round-trip.yaml");
  EXPECT_EQ(again, config) << yaml;
  EXPECT_TRUE(again.ignored_keys.empty());
  EXPECT_EQ(to_yaml(again), yaml);
  // Every field is written, at its NeMo path.
  EXPECT_THAT(yaml, HasSubstr("model:\n  micro_batch_size: 4\n"));
  EXPECT_THAT(yaml, HasSubstr("  optim:\n    name: \"distributed_fused_adam\"\n"));
  EXPECT_THAT(yaml, HasSubstr("    betas: [0.9, 0.98]\n"));
  EXPECT_THAT(yaml, HasSubstr("\n    sched:\n      name: \"constant\"\n"));
  EXPECT_THAT(yaml, HasSubstr("\n  checkpoint_callback_params:\n    every_n_train_steps: 25\n    save_top_k: -1\n"));
  EXPECT_THAT(yaml, Not(HasSubstr("nsys_profile")));
}

TEST(ConfigRoundTrip, DefaultScheduleLengthStaysNull) {
  const TrainConfig config = parse_train_config("", {});
  EXPECT_EQ(config.sched.max_steps, 0);  // null: trainer.max_steps
  EXPECT_THAT(to_yaml(config), HasSubstr("      max_steps: null\n"));
  EXPECT_EQ(parse_train_config(to_yaml(config), {}), config);
}

}  // namespace
}  // namespace adamant::train
