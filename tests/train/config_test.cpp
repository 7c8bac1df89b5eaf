// Training config: keys, types, ranges, combinations, overrides, interpolation.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adamant/core/error.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/train_config.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;

TrainConfig parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return parse_train_config(yaml, overrides, "test.yaml");
}

// The message of the adamant::Error that parsing throws; fails the test if none is thrown.
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse(yaml, overrides);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(ConfigKeys, EmptyFileGivesDefaultsWithDerivedValues) {
  const TrainConfig config = parse("");
  EXPECT_EQ(config.model.num_layers, 12);
  EXPECT_EQ(config.optim.name, "fused_adam");
  // Derived as NeMo's file derives them: positions = sequence, MLP = 4 x hidden.
  EXPECT_EQ(config.model.max_position_embeddings, config.model.seq_length);
  EXPECT_EQ(config.model.ffn_hidden_size, 4 * config.model.hidden_size);
  EXPECT_EQ(config.data.tokenizer.vocab_file, ".cache/data/gpt2/encoder.json");
  EXPECT_EQ(config.data.tokenizer.merge_file, ".cache/data/gpt2/vocab.bpe");
  EXPECT_TRUE(config.ignored_keys.empty());
  EXPECT_EQ(ignored_keys_warning(config), "");
}

TEST(ConfigKeys, GeluFormAndRestoreFromPath) {
  const TrainConfig config = parse("model:\n  openai_gelu: true\n  restore_from_path: gpt2-folder\n");
  EXPECT_EQ(config.model.gelu(), kernels::GeluForm::tanh);
  EXPECT_EQ(config.trainer.restore_from_path, "gpt2-folder");
  EXPECT_EQ(gpt_config_of(config, 50257).gelu(), kernels::GeluForm::tanh);
  EXPECT_EQ(parse(to_yaml(config)), config);
  const TrainConfig defaults = parse("model:\n  restore_from_path: null\n  openai_gelu: False\n");
  EXPECT_TRUE(defaults.trainer.restore_from_path.empty());
  EXPECT_EQ(gpt_config_of(defaults, 50257).gelu(), kernels::GeluForm::exact);
  EXPECT_THAT(error_of("model:\n  openai_gelu: 2\n"), HasSubstr("model.openai_gelu"));
}

// NeMo's MLP with bias_activation_fusion (its template's setting) runs its fused bias-GELU,
// the tanh approximation, whatever openai_gelu says; without it, openai_gelu chooses.
TEST(ConfigKeys, BiasActivationFusionComputesTheTanhGeluAsNemoDoes) {
  for (const bool fusion : {false, true}) {
    for (const bool openai : {false, true}) {
      const TrainConfig config = parse(fmt::format("model:\n  bias_activation_fusion: {}\n  openai_gelu: {}\n",
                                                   fusion ? "True" : "False", openai ? "True" : "False"));
      EXPECT_EQ(config.model.gelu(), fusion || openai ? kernels::GeluForm::tanh : kernels::GeluForm::exact)
          << "fusion " << fusion << ", openai_gelu " << openai;
      EXPECT_EQ(parse(to_yaml(config)), config);  // both keys are written back
      EXPECT_TRUE(config.ignored_keys.empty());
    }
  }
  EXPECT_EQ(parse("model:\n  init_method_std: 0.01\n").model.gelu(), kernels::GeluForm::exact);  // the default
  EXPECT_THAT(error_of("model:\n  bias_activation_fusion: yes please\n"), HasSubstr("model.bias_activation_fusion"));
}

TEST(ConfigKeys, DerivedDefaultsFollowOtherKeysAndNullTokenizerFiles) {
  const TrainConfig config = parse(
      "model:\n  hidden_size: 512\n  num_attention_heads: 8\n  encoder_seq_length: 1024\n"
      "  tokenizer:\n    vocab_file: null\n    merge_file: my/merges.txt\n");
  EXPECT_EQ(config.model.ffn_hidden_size, 2048);
  EXPECT_EQ(config.model.max_position_embeddings, 1024);
  EXPECT_EQ(config.data.tokenizer.vocab_file, ".cache/data/gpt2/encoder.json");
  EXPECT_EQ(config.data.tokenizer.merge_file, "my/merges.txt");
}

TEST(ConfigKeys, UnknownKeySuggestsClosestKnownKey) {
  const std::string message = error_of("model:\n  optim:\n    learning_rate: 3e-4\n");
  EXPECT_THAT(message, HasSubstr("unknown config key 'model.optim.learning_rate' (in test.yaml, line 3)"));
  EXPECT_THAT(message, HasSubstr("did you mean 'model.optim.lr'?"));
  EXPECT_THAT(error_of("model:\n  optim:\n    epsilon: 1e-8\n"), HasSubstr("did you mean 'model.optim.eps'?"));
}

TEST(ConfigKeys, MisspeltNestedKeysAndSections) {
  EXPECT_THAT(error_of("model:\n  optim:\n    sched:\n      warmup_step: 10\n"),
              HasSubstr("'model.optim.sched.warmup_step' (in test.yaml, line 4); did you mean "
                        "'model.optim.sched.warmup_steps'?"));
  EXPECT_THAT(error_of("model:\n  optmi:\n    lr: 1e-3\n"),
              HasSubstr("unknown config key 'model.optmi' (in test.yaml, line 2); did you mean 'model.optim'?"));
  EXPECT_THAT(error_of("modle:\n  num_layers: 2\n"),
              HasSubstr("'modle' (in test.yaml, line 1); did you mean 'model'?"));
  // No far-fetched guesses for short names: model.foo is not model.fp8.
  EXPECT_THAT(error_of("model:\n  foo: 1\n"), HasSubstr("valid keys under model are: micro_batch_size,"));
  // The right name in the wrong section.
  EXPECT_THAT(error_of("trainer:\n  micro_batch_size: 4\n"), HasSubstr("did you mean 'model.micro_batch_size'?"));
  // Nothing close: the section's keys are listed.
  const std::string message = error_of("exp_manager:\n  zzzzzzzzzzzzzzzz: 1\n");
  EXPECT_THAT(message, HasSubstr("'exp_manager.zzzzzzzzzzzzzzzz'"));
  EXPECT_THAT(message, HasSubstr("valid keys under exp_manager are: exp_dir, name,"));
}

TEST(ConfigKeys, DuplicateKeyAndSectionWithValueAreErrors) {
  EXPECT_THAT(error_of("trainer:\n  max_steps: 5\n  max_steps: 6\n"),
              HasSubstr("config key 'trainer.max_steps' appears twice"));
  EXPECT_THAT(error_of("model:\n  optim: fused_adam\n"),
              HasSubstr("'model.optim' is a section and must hold keys, got 'fused_adam'"));
}

// A key spelled with dots in the file would be read as a path: under a missing section it
// used to be dropped silently (model.hidden_size) or to reach a null node (a NeMo key). It is
// refused with the nested spelling and the override form.
TEST(ConfigKeys, DottedKeysInTheFileAreRefused) {
  for (const char* yaml : {"model.hidden_size: 5\n", "model.ffn_dropout: 0.1\n", "model:\n  optim.lr: 0.5\n"}) {
    const std::string message = error_of(yaml);
    EXPECT_THAT(message, HasSubstr("has a dot in its name")) << yaml;
    EXPECT_THAT(message, HasSubstr("nest it")) << yaml;
  }
  EXPECT_THAT(error_of("model.hidden_size: 5\n"), HasSubstr("'model.hidden_size'"));
  EXPECT_THAT(error_of("model:\n  optim.lr: 0.5\n"), HasSubstr("'model.optim.lr'"));
}

TEST(ConfigKeys, YamlSyntaxErrorNamesFileAndLine) {
  EXPECT_THAT(error_of("trainer:\n  max_steps: [1, 2\n"), HasSubstr("test.yaml: YAML syntax error at line"));
  EXPECT_THAT(error_of("- 1\n- 2\n"), HasSubstr("the top level must be a mapping"));
}

TEST(ConfigKeys, MissingFileIsNamed) {
  try {
    load_train_config("/nonexistent/adamant.yaml", {});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(std::string(error.what()), HasSubstr("cannot open config file /nonexistent/adamant.yaml"));
  }
}

TEST(ConfigTypes, WrongTypesNameKeyValueAndExpectedType) {
  EXPECT_THAT(error_of("model:\n  num_layers: 12.5\n"),
              HasSubstr("model.num_layers: expected an integer, got '12.5' (in test.yaml, line 2)"));
  EXPECT_THAT(error_of("model:\n  optim:\n    lr: \"3e-4\"\n"),
              HasSubstr("model.optim.lr: expected a number, got the string \"3e-4\""));
  EXPECT_THAT(error_of("model:\n  optim:\n    lr: fast\n"), HasSubstr("model.optim.lr: expected a number, got 'fast'"));
  EXPECT_THAT(error_of("model:\n  megatron_amp_O2: yes\n"),
              HasSubstr("model.megatron_amp_O2: expected true or false, got 'yes'"));
  EXPECT_THAT(error_of("model:\n  hidden_size: [768]\n"),
              HasSubstr("model.hidden_size: expected an integer, got a list [768]"));
  EXPECT_THAT(error_of("trainer:\n  accelerator: {kind: gpu}\n"),
              HasSubstr("trainer.accelerator: expected a string, got a mapping"));
  EXPECT_THAT(error_of("trainer:\n  max_steps: 99999999999\n"), HasSubstr("trainer.max_steps: 99999999999"));
  EXPECT_THAT(error_of("model:\n  micro_batch_size: null\n"),
              HasSubstr("model.micro_batch_size: expected an integer, got null"));
  EXPECT_THAT(error_of("model:\n  data:\n    splits_string: ???\n"),
              HasSubstr("model.data.splits_string: the value is '?\?\?' (a required value left unset)"));
}

TEST(ConfigTypes, NumbersAcceptIntegersAndExponents) {
  const TrainConfig config = parse("model:\n  optim:\n    lr: 3e-4\n    weight_decay: 0\n    eps: 1.0E-6\n");
  EXPECT_DOUBLE_EQ(config.sched.lr, 3e-4);
  EXPECT_DOUBLE_EQ(config.optim.weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(config.optim.eps, 1e-6);
}

TEST(ConfigTypes, PrecisionSpellings) {
  const std::vector<std::pair<std::string, DType>> cases = {
      {"32", DType::f32},          {"\"32\"", DType::f32}, {"bf16", DType::bf16},  {"\"bf16\"", DType::bf16},
      {"bf16-mixed", DType::bf16}, {"16", DType::f16},     {"\"16\"", DType::f16}, {"16-mixed", DType::f16}};
  for (const auto& [text, expected] : cases) {
    EXPECT_EQ(parse("trainer:\n  precision: " + text + "\n").trainer.precision, expected) << text;
  }
  EXPECT_THAT(error_of("trainer:\n  precision: fp8\n"), HasSubstr("trainer.precision: unknown precision 'fp8'"));
  EXPECT_THAT(error_of("trainer:\n  precision: 64\n"), HasSubstr("trainer.precision: precision '64' is not supported"));
}

TEST(ConfigTypes, GradSyncDtypeSpellings) {
  for (const auto& [text, expected] : std::vector<std::pair<std::string, DType>>{
           {"fp32", DType::f32}, {"float32", DType::f32}, {"bf16", DType::bf16}, {"bfloat16", DType::bf16}}) {
    const std::string dfa = "model:\n  megatron_amp_O2: true\n  optim:\n    name: distributed_fused_adam\n";
    const TrainConfig config = parse(dfa + "    grad_sync_dtype: " + text + "\n");
    EXPECT_EQ(config.optim.grad_sync_dtype, expected);
    EXPECT_EQ(config.model.grad_buffer, expected) << "gradients accumulate in the dtype they sync in";
  }
  EXPECT_EQ(parse("model:\n  optim:\n    name: fused_adam\n").model.grad_buffer, DType::f32);
  // A bf16 gradient sync is distributed_fused_adam's.
  EXPECT_THAT(error_of("model:\n  optim:\n    grad_sync_dtype: bf16\n"),
              HasSubstr("model.optim.grad_sync_dtype=bf16 is supported by distributed_fused_adam only (in test.yaml, "
                        "line 3)"));
  EXPECT_THAT(error_of("model:\n  optim:\n    grad_sync_dtype: fp16\n"),
              HasSubstr("model.optim.grad_sync_dtype: unsupported value 'fp16'"));
}

TEST(ConfigTypes, ClassifierLogitsDtypeSpellings) {
  EXPECT_EQ(parse("model:\n  micro_batch_size: 2\n").model.classifier_logits, DType::f32);  // the default
  for (const auto& [text, expected] : std::vector<std::pair<std::string, DType>>{
           {"fp32", DType::f32}, {"float32", DType::f32}, {"bf16", DType::bf16}, {"bfloat16", DType::bf16}}) {
    EXPECT_EQ(parse("model:\n  classifier_logits_dtype: " + text + "\n").model.classifier_logits, expected) << text;
  }
  EXPECT_THAT(error_of("model:\n  classifier_logits_dtype: fp16\n"),
              HasSubstr("model.classifier_logits_dtype: unsupported value 'fp16' (in test.yaml, line 2); use fp32 "
                        "(float32) or bf16 (bfloat16)"));
  EXPECT_THAT(error_of("model:\n  classifier_logits_dtype: fp8\n"),
              HasSubstr("model.classifier_logits_dtype: unsupported value"));
}

TEST(ConfigRanges, OutOfRangeValuesNameKeyAndMeaning) {
  EXPECT_THAT(error_of("model:\n  optim:\n    bucket_cap_mb: -1\n"),
              HasSubstr("model.optim.bucket_cap_mb must be > 0 (got -1) (in test.yaml, line 3); it is the bucket "
                        "size in MiB, e.g. 100"));
  EXPECT_THAT(error_of("model:\n  optim:\n    update_sms: -1\n"),
              HasSubstr("model.optim.update_sms must be >= 0 (got -1) (in test.yaml, line 3); it is the SMs Adam runs "
                        "on beside the forward (0: every SM)"));
  EXPECT_THAT(error_of("model:\n  hidden_dropout: 1.0\n"), HasSubstr("model.hidden_dropout must be in [0, 1) (got 1)"));
  EXPECT_THAT(error_of("model:\n  optim:\n    lr: 0\n"), HasSubstr("model.optim.lr must be > 0 (got 0)"));
  EXPECT_THAT(error_of("model:\n  optim:\n    eps: 0\n"), HasSubstr("model.optim.eps must be > 0"));
  EXPECT_THAT(error_of("model:\n  optim:\n    betas: [0.9, 1.0]\n"),
              HasSubstr("model.optim.betas[1] must be in [0, 1)"));
  EXPECT_THAT(error_of("model:\n  hidden_size: 770\n  num_attention_heads: 12\n"),
              HasSubstr("model.hidden_size (770) must be divisible by model.num_attention_heads (12)"));
  EXPECT_THAT(error_of("model:\n  global_batch_size: 10\n  micro_batch_size: 4\n"),
              HasSubstr("model.global_batch_size (10) must be divisible by model.micro_batch_size (4)"));
  EXPECT_THAT(error_of("model:\n  encoder_seq_length: 4096\n  max_position_embeddings: 2048\n"),
              HasSubstr("model.encoder_seq_length (4096) must be <= model.max_position_embeddings (2048)"));
  EXPECT_THAT(error_of("trainer:\n  max_steps: 0\n"), HasSubstr("trainer.max_steps must be >= 1 (got 0)"));
  EXPECT_THAT(error_of("model:\n  data:\n    splits_string: \"90,x,1\"\n"),
              HasSubstr("model.data.splits_string: '90,x,1' is not a train,validation,test split"));
  EXPECT_THAT(error_of("exp_manager:\n  checkpoint_callback_params:\n    save_top_k: 0\n"),
              HasSubstr("exp_manager.checkpoint_callback_params.save_top_k must be -1 (keep all) or >= 1"));
}

TEST(ConfigRanges, ActivationsCheckpointGranularityIsNullOrSelective) {
  EXPECT_FALSE(parse("").model.recompute_activation);
  EXPECT_FALSE(parse("model:\n  activations_checkpoint_granularity: null\n").model.recompute_activation);
  EXPECT_TRUE(parse("", {"model.activations_checkpoint_granularity=selective"}).model.recompute_activation);
  const std::string message = error_of("model:\n  activations_checkpoint_granularity: full\n");
  EXPECT_THAT(message, HasSubstr("model.activations_checkpoint_granularity is 'full' (in test.yaml, line 2)"));
  EXPECT_THAT(message, HasSubstr("use selective"));
}

TEST(ConfigCombinations, DistributedFusedAdamRequiresO2) {
  const std::string message = error_of("model:\n  optim:\n    name: distributed_fused_adam\n");
  EXPECT_THAT(message, HasSubstr("model.optim.name=distributed_fused_adam requires model.megatron_amp_O2=true"));
  EXPECT_THAT(message, HasSubstr("set model.megatron_amp_O2: true"));
  const TrainConfig config = parse("model:\n  megatron_amp_O2: true\n  optim:\n    name: distributed_fused_adam\n");
  EXPECT_EQ(config.optim.name, "distributed_fused_adam");
}

TEST(ConfigCombinations, PrecisionConflicts) {
  EXPECT_THAT(error_of("trainer:\n  precision: 32\nmodel:\n  megatron_amp_O2: true\n"),
              HasSubstr("model.megatron_amp_O2=true needs half-precision weights, but trainer.precision is 32"));
  EXPECT_THAT(error_of("trainer:\n  precision: 16\nmodel:\n  megatron_amp_O2: true\n  optim:\n"
                       "    name: distributed_fused_adam\n    store_param_remainders: true\n"),
              HasSubstr("model.optim.store_param_remainders=true needs bf16 weights"));
}

TEST(ConfigCombinations, OptimizerAndScheduleNames) {
  const std::string message = error_of("model:\n  optim:\n    name: lamb\n");
  EXPECT_THAT(message, HasSubstr("model.optim.name: unknown optimizer 'lamb'"));
  EXPECT_THAT(message, HasSubstr("fused_adam, distributed_fused_adam"));
  EXPECT_THAT(error_of("model:\n  optim:\n    sched:\n      name: WarmupAnnealing\n"),
              HasSubstr("unknown schedule 'WarmupAnnealing' (in test.yaml, line 4); use CosineAnnealing or constant"));
  // torch.optim.Adam puts the decay into the gradient; AdamW decouples it.
  const TrainConfig adam = parse("model:\n  optim:\n    name: adam\n");
  EXPECT_EQ(adam.optim.name, "fused_adam");
  EXPECT_FALSE(adam.optim.adam_w_mode);
  const TrainConfig adamw = parse("model:\n  optim:\n    name: adamw\n");
  EXPECT_EQ(adamw.optim.name, "fused_adam");
  EXPECT_TRUE(adamw.optim.adam_w_mode);
  // Apex options for the other optimizer are accepted (NeMo configs carry them).
  EXPECT_DOUBLE_EQ(parse("model:\n  optim:\n    bucket_cap_mb: 50\n").optim.bucket_cap_mb, 50.0);
}

TEST(ConfigOverrides, AppliedAfterTheFileWithYamlValues) {
  const TrainConfig config = parse("model:\n  optim:\n    lr: 1e-3\n",
                                   {"model.optim.lr=3e-4", "model.optim.betas=[0.8,0.95]", "trainer.precision=16",
                                    "+model.seed=7", "++trainer.max_steps=12", "model.data.data_prefix=[0.5,a,1.5,b]"});
  EXPECT_DOUBLE_EQ(config.sched.lr, 3e-4);
  EXPECT_DOUBLE_EQ(config.optim.beta1, 0.8);
  EXPECT_DOUBLE_EQ(config.optim.beta2, 0.95);
  EXPECT_EQ(config.trainer.precision, DType::f16);
  EXPECT_EQ(config.trainer.seed, 7);
  EXPECT_EQ(config.trainer.max_steps, 12);
  ASSERT_EQ(config.data.data_prefix.size(), 2U);
  EXPECT_EQ(config.data.data_prefix[1], (data::WeightedPrefix{1.5, "b"}));
}

TEST(ConfigOverrides, MalformedAndUnknownOverrides) {
  EXPECT_THAT(error_of("", {"model.optim.lr"}),
              HasSubstr("malformed override 'model.optim.lr': no '='; expected key=value, e.g. model.optim.lr=3e-4"));
  EXPECT_THAT(error_of("", {"model..lr=1"}), HasSubstr("malformed override 'model..lr=1'"));
  EXPECT_THAT(error_of("", {"model.optim.learning_rate=3e-4"}),
              HasSubstr("unknown config key 'model.optim.learning_rate' (from override "
                        "'model.optim.learning_rate=3e-4'); did you mean 'model.optim.lr'?"));
  EXPECT_THAT(error_of("", {"model.optim.lr=[1, 2"}), HasSubstr("override 'model.optim.lr=[1, 2': the value"));
  EXPECT_THAT(error_of("", {"model.optim.lr=fast"}),
              HasSubstr("model.optim.lr: expected a number, got 'fast' (from override 'model.optim.lr=fast')"));
  EXPECT_THAT(error_of("model:\n  optim:\n    betas: [0.9, 0.95]\n", {"model.optim.betas.first=0.8"}),
              HasSubstr("unknown config key 'model.optim.betas.first'"));
  EXPECT_THAT(error_of("model:\n  nsys_profile: false\n", {"model.nsys_profile.enabled=true"}),
              HasSubstr("override 'model.nsys_profile.enabled=true': 'model.nsys_profile' holds a value, not a "
                        "section"));
}

TEST(ConfigInterpolation, ReferencesResolveWithTypesAndAfterOverrides) {
  const std::string good =
      "name: my_run\n"
      "trainer:\n  max_steps: 500\n"
      "exp_manager:\n  name: ${name}_v2\n"
      "model:\n  encoder_seq_length: 1024\n  max_position_embeddings: ${.encoder_seq_length}\n"
      "  data:\n    seq_length: ${model.encoder_seq_length}\n"
      "  optim:\n    bucket_cap_mb: 10.5\n    sched:\n      max_steps: ${trainer.max_steps}\n"
      "      warmup_steps: ${..bucket_cap_mb}\n";
  EXPECT_THAT(error_of(good), HasSubstr("model.optim.sched.warmup_steps: expected an integer, got '10.5'"));
  const TrainConfig config = parse(good, {"trainer.max_steps=77", "model.optim.bucket_cap_mb=25"});
  EXPECT_EQ(config.exp_manager.name, "my_run_v2");
  EXPECT_EQ(config.model.max_position_embeddings, 1024);
  EXPECT_EQ(config.sched.max_steps, 77);  // sees the override, as in Hydra
  EXPECT_EQ(config.sched.warmup_steps, 25);
  // A reference to a known key left out of the file gives Adamant's default.
  EXPECT_EQ(parse("model:\n  optim:\n    sched:\n      max_steps: ${trainer.max_steps}\n").sched.max_steps,
            TrainConfig{}.trainer.max_steps);
}

TEST(ConfigInterpolation, UnsupportedFormsAreErrorsNamingTheKey) {
  EXPECT_THAT(error_of("exp_manager:\n  exp_dir: ${oc.env:HOME}\n"),
              HasSubstr("exp_manager.exp_dir: unsupported interpolation '${oc.env:HOME}'"));
  EXPECT_THAT(error_of("model:\n  num_layers: ${multiply:${model.hidden_size}, 2}\n"),
              HasSubstr("model.num_layers: unsupported interpolation"));
  EXPECT_THAT(error_of("model:\n  num_layers: ${model.nope}\n"),
              HasSubstr("model.num_layers: '${model.nope}' refers to 'model.nope', which is not in the config"));
  EXPECT_THAT(error_of("model:\n  num_layers: ${model.hidden_size}\n  hidden_size: ${model.num_layers}\n"),
              HasSubstr("interpolation cycle: model.num_layers -> model.hidden_size -> model.num_layers"));
  EXPECT_THAT(error_of("model:\n  num_layers: ${model.hidden_size\n"), HasSubstr("unterminated interpolation"));
}

TEST(ConfigDataPrefix, BlendSyntaxForms) {
  using Blend = std::vector<data::WeightedPrefix>;
  EXPECT_EQ(parse("model:\n  data:\n    data_prefix: corpus/a_text_document\n").data.data_prefix,
            (Blend{{1.0, "corpus/a_text_document"}}));
  EXPECT_EQ(parse("model:\n  data:\n    data_prefix: [corpus/a]\n").data.data_prefix, (Blend{{1.0, "corpus/a"}}));
  EXPECT_EQ(parse("model:\n  data:\n    data_prefix:\n    - 0.7\n    - web\n    - 0.3\n    - books\n").data.data_prefix,
            (Blend{{0.7, "web"}, {0.3, "books"}}));
  EXPECT_TRUE(parse("model:\n  data:\n    data_prefix: null\n").data.data_prefix.empty());
  EXPECT_THAT(error_of("model:\n  data:\n    data_prefix: [0.5, a, b]\n"),
              HasSubstr("model.data.data_prefix: a blend needs weight/prefix pairs, got 3 entries"));
  EXPECT_THAT(error_of("model:\n  data:\n    data_prefix: [0, a, 1, b]\n"),
              HasSubstr("model.data.data_prefix[0]: blend weight must be > 0 (got 0)"));
  EXPECT_THAT(error_of("model:\n  data:\n    data_prefix: [a, b]\n"),
              HasSubstr("model.data.data_prefix[0]: expected a number, got 'a'"));
  EXPECT_THAT(error_of("model:\n  data:\n    data_prefix: ???\n"),
              HasSubstr("model.data.data_prefix: the value is '?\?\?'"));
}

TEST(ConfigBetas, ListOfTwoNumbers) {
  const TrainConfig config = parse("model:\n  optim:\n    betas:\n    - 0.9\n    - 0.95\n");
  EXPECT_DOUBLE_EQ(config.optim.beta1, 0.9);
  EXPECT_DOUBLE_EQ(config.optim.beta2, 0.95);
  EXPECT_THAT(error_of("model:\n  optim:\n    betas: [0.9]\n"),
              HasSubstr("model.optim.betas: expected a list of two numbers [beta1, beta2]"));
  EXPECT_THAT(error_of("model:\n  optim:\n    betas: 0.9\n"), HasSubstr("got '0.9'"));
  EXPECT_THAT(error_of("model:\n  optim:\n    betas: [0.9, high]\n"),
              HasSubstr("model.optim.betas[1]: expected a number, got 'high'"));
}

}  // namespace
}  // namespace adamant::train
