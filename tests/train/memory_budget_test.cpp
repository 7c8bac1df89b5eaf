// The memory estimate made before a run allocates anything: the closed-form parameter count
// against the parameter list the model builds, and refusals that name the numbers and the keys.
#include "adamant/train/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "adamant/core/error.h"
#include "adamant/model/param_layout.h"
#include "adamant/train/run_setup.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

TrainConfig small_config() {
  TrainConfig c;
  c.model.num_layers = 3;
  c.model.hidden_size = 64;
  c.model.ffn_hidden_size = 192;
  c.model.num_attention_heads = 4;
  c.model.seq_length = 32;
  return c;
}

std::string refusal(const TrainConfig& config, double host, double device, bool on_gpu) {
  const model::GptConfig gpt = gpt_config_of(config, 50257);
  try {
    check_memory_budget(config, estimate_memory(config, gpt, 1, on_gpu), host, device, on_gpu);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryBudget, ClosedFormParameterCountMatchesTheParameterList) {
  TrainConfig config = small_config();
  for (const int tp : {1, 2, 4}) {
    config.model.tensor_parallel_size = tp;
    const model::GptConfig gpt = gpt_config_of(config, 50257);
    EXPECT_EQ(parameters_per_rank(gpt), static_cast<double>(model::build_param_list(gpt).total_numel)) << tp;
  }
}

TEST(MemoryBudget, ModelStateFollowsTheOptimizerAndPrecision) {
  TrainConfig config = small_config();
  const model::GptConfig gpt = gpt_config_of(config, 50257);
  const double n = parameters_per_rank(gpt);
  config.optim.name = "fused_adam";
  config.optim.megatron_amp_O2 = false;  // fp32 weights and grads, m and v: 16 bytes
  EXPECT_EQ(estimate_memory(config, gpt, 4, false).model_state, 16 * n);
  config.optim.megatron_amp_O2 = true;  // bf16 weights, fp32 grads, main, m, v over 4 ranks: 2 + 4 + 12 / 4
  config.trainer.precision = DType::bf16;
  config.optim.name = "distributed_fused_adam";
  EXPECT_EQ(estimate_memory(config, gpt, 4, false).model_state, 9 * n);
}

TEST(MemoryBudget, AbsurdSizesAreRefusedWithTheNumbersAndTheKeys) {
  TrainConfig config = small_config();
  EXPECT_EQ(refusal(config, 1 * GiB, 0, false), "");

  config.model.num_layers = 1000000;
  config.model.hidden_size = 768;
  config.model.ffn_hidden_size = 3072;
  config.model.num_attention_heads = 12;
  const std::string host = refusal(config, 24 * GiB, 0, false);
  EXPECT_THAT(host, HasSubstr("model.num_layers=1000000"));
  EXPECT_THAT(host, HasSubstr("7.09e+12 parameters per rank"));
  EXPECT_THAT(host, HasSubstr("of host memory per rank"));
  EXPECT_THAT(host, HasSubstr("there is 24.0 GiB per rank"));
  EXPECT_THAT(host, HasSubstr("model.tensor_model_parallel_size"));

  // On a GPU the model state and activations must fit the device; the host holds the rest.
  config.model.num_layers = 200;
  config.model.hidden_size = 8192;
  config.model.ffn_hidden_size = 32768;
  config.model.num_attention_heads = 64;
  const std::string gpu = refusal(config, 2048 * GiB, 141 * GiB, true);
  EXPECT_THAT(gpu, HasSubstr("of GPU memory per rank"));
  EXPECT_THAT(gpu, HasSubstr("there is 141.0 GiB per rank"));
}

TEST(MemoryBudget, PipelineStagesAreSizedByTheBusiestStageNotTheWholeModel) {
  TrainConfig config = small_config();
  config.model.num_layers = 32;
  config.model.hidden_size = 1024;
  config.model.ffn_hidden_size = 4096;
  config.model.num_attention_heads = 16;
  config.data.micro_batch_size = 1;
  config.data.global_batch_size = 8;
  const MemoryEstimate whole = estimate_memory(config, gpt_config_of(config, 50257), 1, false);
  config.model.pipeline_parallel_size = 4;
  const model::GptConfig staged = gpt_config_of(config, 50257);
  const MemoryEstimate stage = estimate_memory(config, staged, 1, false);
  // The busiest of four stages holds 8 of the 32 layers and the word embedding (first stage, or its tied
  // copy on the last): its parameter list, not a quarter of the closed form.
  double most = 0;
  for (int s = 0; s < 4; ++s) {
    most = std::max(
        most, static_cast<double>(model::build_stage_param_list(staged, model::pipeline_stage(staged, s)).total_numel));
  }
  EXPECT_EQ(stage.parameters, most);
  EXPECT_LT(stage.on_compute_device, 0.5 * whole.on_compute_device);
  // A budget between the two: the whole model on one rank is refused, four stages run.
  const double budget = 0.5 * (stage.on_host + whole.on_host);
  EXPECT_NO_THROW(check_memory_budget(config, stage, budget, 0, false));
  config.model.pipeline_parallel_size = 1;
  try {
    check_memory_budget(config, whole, budget, 0, false);
    ADD_FAILURE() << "the whole model fitted " << budget << " bytes";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.pipeline_model_parallel_size"));
  }
}

}  // namespace
}  // namespace adamant::train
