// The layout planner: which tp x pp x dp layouts are valid (counted by hand for small configs), the
// bubble of each against (p - 1) / (m v), the order of the plans, the stage-aware memory of a pipeline
// stage, and the report when nothing fits.
#include "adamant/train/layout_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "adamant/core/error.h"
#include "adamant/core/memory_stats.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/model_memory.h"
#include "adamant/model/param_layout.h"
#include "adamant/train/plan_report.h"

namespace adamant::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kVocab = 50257;
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

TrainConfig four_layer_config() {
  TrainConfig c;
  c.trainer.precision = DType::bf16;
  c.optim.megatron_amp_O2 = true;
  c.optim.name = "distributed_fused_adam";
  c.model.num_layers = 4;
  c.model.hidden_size = 64;
  c.model.num_attention_heads = 4;
  c.model.ffn_hidden_size = 128;
  c.model.seq_length = 32;
  c.model.max_position_embeddings = 32;
  c.model.virtual_pipeline_size = 2;
  c.data.micro_batch_size = 1;
  c.data.global_batch_size = 8;
  return c;
}

using Row = std::tuple<int, int, int, int, int>;  // tp, pp, v, dp, micro-batches

std::vector<Row> rows(const std::vector<ParallelLayout>& layouts) {
  std::vector<Row> out;
  for (const ParallelLayout& l : layouts) out.emplace_back(l.tp, l.pp, l.virtual_pp, l.dp, l.micro_batches);
  return out;
}

TEST(LayoutPlan, ValidLayoutsFollowTheRules) {
  TrainConfig config = four_layer_config();
  // 4 GPUs, 8 samples of 1: tp in {1, 2, 4}; pp 4 with v 2 would need 8 layers.
  EXPECT_EQ(rows(valid_layouts(config, 4)), (std::vector<Row>{{1, 1, 1, 4, 2},
                                                              {1, 2, 1, 2, 4},
                                                              {1, 2, 2, 2, 4},
                                                              {1, 4, 1, 1, 8},
                                                              {2, 1, 1, 2, 4},
                                                              {2, 2, 1, 1, 8},
                                                              {2, 2, 2, 1, 8},
                                                              {4, 1, 1, 1, 8}}));
  // A global batch of 2: dp 4 gets half a sample; pp 2 at dp 2 and pp 4 get fewer micro-batches than stages.
  config.data.global_batch_size = 2;
  EXPECT_EQ(rows(valid_layouts(config, 4)),
            (std::vector<Row>{{2, 1, 1, 2, 1}, {2, 2, 1, 1, 2}, {2, 2, 2, 1, 2}, {4, 1, 1, 1, 2}}));
  // 6 heads: tp 4 does not divide them; v 3 needs the micro-batches in groups of pp and 4 layers in 6 chunks.
  config = four_layer_config();
  config.model.num_attention_heads = 6;
  config.model.hidden_size = 96;
  config.model.ffn_hidden_size = 384;
  config.model.virtual_pipeline_size = 3;
  EXPECT_EQ(rows(valid_layouts(config, 4)),
            (std::vector<Row>{{1, 1, 1, 4, 2}, {1, 2, 1, 2, 4}, {1, 4, 1, 1, 8}, {2, 1, 1, 2, 4}, {2, 2, 1, 1, 8}}));
  // Tensor parallelism stays within a node of 8: 16 GPUs with 16 heads give tp 1, 2, 4, 8 only.
  config = four_layer_config();
  config.model.num_attention_heads = 16;
  config.data.global_batch_size = 64;
  for (const ParallelLayout& l : valid_layouts(config, 16)) EXPECT_LE(l.tp, 8);
  EXPECT_EQ(valid_layouts(config, 16).back().tp, 8);
}

TEST(LayoutPlan, BubbleIsStagesLessOneOverMicroBatchesTimesChunks) {
  const TrainConfig config = four_layer_config();
  const auto plans = plan_layouts(config, kVocab, 4, Device::cpu(), 64 * GiB);
  ASSERT_EQ(plans.size(), 8u);
  for (const LayoutPlan& p : plans) {
    const ParallelLayout& l = p.layout;
    EXPECT_DOUBLE_EQ(p.bubble, (l.pp - 1.0) / (l.micro_batches * l.virtual_pp)) << l.tp << l.pp << l.virtual_pp;
  }
}

TEST(LayoutPlan, PlansAreFastestFirstAndWithoutCommunicationRankByBubble) {
  const TrainConfig config = four_layer_config();
  const auto plans = plan_layouts(config, kVocab, 4, Device::cpu(), 64 * GiB);
  ASSERT_FALSE(plans.empty());
  EXPECT_DOUBLE_EQ(plans.front().relative_time, 1.0);
  for (std::size_t i = 1; i < plans.size(); ++i) {
    EXPECT_LE(plans[i - 1].step_seconds, plans[i].step_seconds);
    EXPECT_GE(plans[i].relative_time, 1.0);
  }
  // With free communication the step time is the compute share times (1 + bubble): the pipelines without a
  // bubble come first, then (p - 1) / (m v) in increasing order.
  CostModel free_links;
  free_links.intra_node_bytes_per_second = 1e300;
  free_links.inter_node_bytes_per_second = 1e300;
  const auto by_bubble = plan_layouts(config, kVocab, 4, Device::cpu(), 64 * GiB, free_links);
  for (std::size_t i = 1; i < by_bubble.size(); ++i) EXPECT_LE(by_bubble[i - 1].bubble, by_bubble[i].bubble);
  EXPECT_DOUBLE_EQ(by_bubble.back().bubble, 3.0 / 8.0);  // pp 4, 8 micro-batches
  const double ideal = by_bubble.front().step_seconds;
  EXPECT_DOUBLE_EQ(by_bubble.back().step_seconds, ideal * (1 + 3.0 / 8.0));
}

TEST(LayoutPlan, CommunicationFollowsTheRingFormulas) {
  const TrainConfig config = four_layer_config();
  for (const LayoutPlan& p : plan_layouts(config, kVocab, 4, Device::cpu(), 64 * GiB)) {
    const ParallelLayout& l = p.layout;
    const StepCommunication& c = p.communication;
    // CPU activations are fp32: one micro-batch's residual stream is 32 x 64 x 4 bytes.
    const double stream = 32.0 * 64 * 4;
    EXPECT_DOUBLE_EQ(c.tp_per_layer, l.tp == 1 ? 0.0 : 4 * 2.0 * (l.tp - 1) / l.tp * stream);
    EXPECT_DOUBLE_EQ(c.pp_per_step, l.pp == 1 ? 0.0 : 2.0 * l.micro_batches * l.virtual_pp * stream);
    // fp32 gradients reduce-scattered, bf16 weights all-gathered: (dp - 1) / dp of the padded buffers.
    EXPECT_DOUBLE_EQ(c.dp_grad_sync, (l.dp - 1.0) / l.dp * p.memory.grads);
    EXPECT_DOUBLE_EQ(c.dp_param_sync, (l.dp - 1.0) / l.dp * p.memory.weights);
  }
}

TEST(LayoutPlan, FirstStageHoldsOnePassPerStageAndTheLastTheClassifier) {
  TrainConfig config = four_layer_config();
  config.model.num_layers = 8;
  config.model.virtual_pipeline_size = 1;
  const model::GptConfig gpt = layout_model(config, {1, 4, 1, 1, 8}, kVocab);
  const RankMemory first = stage_memory(config, gpt, 1, 8, 0, Device::cpu());
  const RankMemory middle = stage_memory(config, gpt, 1, 8, 1, Device::cpu());
  const RankMemory last = stage_memory(config, gpt, 1, 8, 3, Device::cpu());
  EXPECT_EQ(first.passes_in_flight, 4);
  EXPECT_EQ(middle.passes_in_flight, 3);
  EXPECT_EQ(last.passes_in_flight, 1);
  // Every stage plans the same regions for its two layers: the saved part grows by one pass per stage.
  const double saved_per_pass = first.activations - middle.activations;
  EXPECT_GT(saved_per_pass, 0);
  EXPECT_DOUBLE_EQ(middle.activations - saved_per_pass * 2, last.activations);
  // The word embedding (padded vocabulary x hidden) sits on the first stage and, tied, on the last.
  const double embedding = 50304.0 * 64;
  EXPECT_NEAR(first.parameters - middle.parameters, embedding + 32.0 * 64, 1.0);  // + positions
  EXPECT_NEAR(last.parameters - middle.parameters, embedding + 2 * 64, 1.0);      // + final layernorm
  const RankMemory busiest = busiest_rank_memory(config, gpt, 1, 8, Device::cpu());
  EXPECT_EQ(busiest.stage, first.total() >= last.total() ? 0 : 3);
  EXPECT_DOUBLE_EQ(busiest.total(), std::max(first.total(), last.total()));
}

TEST(LayoutPlan, ModelMemoryIsWhatTheModelAllocates) {
  TrainConfig config = four_layer_config();
  config.model.virtual_pipeline_size = 1;
  for (const int stage : {0, 1}) {
    const model::GptConfig gpt = layout_model(config, {1, 2, 1, 1, 8}, kVocab);
    const int passes = 2 - stage;
    const std::size_t padded = 1000 + model::build_stage_param_list(gpt, model::pipeline_stage(gpt, stage)).total_numel;
    const model::ModelMemory planned =
        model::model_memory(gpt, DType::bf16, 2, Device::cpu(), padded, model::pipeline_stage(gpt, stage), passes);
    const std::size_t before = allocation_stats(Device::cpu()).in_use_bytes;
    const model::GptModel model(gpt, DType::bf16, 2, Device::cpu(), 1, padded, nullptr, stage, passes);
    EXPECT_EQ(allocation_stats(Device::cpu()).in_use_bytes - before, planned.on_device() + planned.on_host());
    EXPECT_EQ(planned.weights, 2 * padded);
    EXPECT_EQ(planned.grads, 4 * padded);
  }
}

TEST(LayoutPlan, BadInputAndNoFitAreExplained) {
  TrainConfig config = four_layer_config();
  try {
    valid_layouts(config, 0);
    ADD_FAILURE() << "0 GPUs accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--gpus 0"));
  }
  PlanRequest request;
  request.config_name = "four.yaml";
  request.gpus = 4;
  request.gpu = false;
  request.memory_per_rank = 1024.0 * 1024.0;  // 1 MiB: nothing fits
  PlanReport report = plan_report(config, request, plan_layouts(config, kVocab, 4, Device::cpu(), 1024.0 * 1024.0));
  EXPECT_EQ(report.fitting, 0);
  EXPECT_THAT(report.text, HasSubstr("No layout fits 1.0 MiB per rank"));
  EXPECT_THAT(report.text, HasSubstr("use more GPUs (--gpus)"));
  EXPECT_THAT(report.text, HasSubstr("model.optim.store_param_remainders=true"));
  EXPECT_THAT(report.text, HasSubstr("model.activations_checkpoint_granularity=selective"));
  EXPECT_THAT(report.text, Not(HasSubstr("lower model.micro_batch_size")));  // it is 1 already

  config.data.global_batch_size = 3;  // no data-parallel size divides it into micro-batches per stage
  config.model.num_attention_heads = 1;
  config.model.ffn_hidden_size = 127;
  report = plan_report(config, request, plan_layouts(config, kVocab, 4, Device::cpu(), 64 * GiB));
  EXPECT_EQ(report.fitting, 0);
  EXPECT_THAT(report.text, HasSubstr("No layout of 4 ranks can run this config"));
  EXPECT_THAT(report.text, HasSubstr("model.global_batch_size (3)"));

  config = four_layer_config();
  request.memory_per_rank = 64 * GiB;
  report = plan_report(config, request, plan_layouts(config, kVocab, 4, Device::cpu(), 64 * GiB));
  EXPECT_EQ(report.fitting, 8);
  EXPECT_THAT(report.text, HasSubstr("model.tensor_model_parallel_size=1 model.pipeline_model_parallel_size=4 "
                                     "model.virtual_pipeline_model_parallel_size=1 trainer.accelerator=cpu"));
}

TEST(LayoutPlan, OverridesNameTheNodes) {
  const TrainConfig config = four_layer_config();
  EXPECT_EQ(layout_overrides(config, {2, 4, 1, 8, 1}, 64, true),
            "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=4 "
            "model.virtual_pipeline_model_parallel_size=1 trainer.devices=8 trainer.num_nodes=8");
  EXPECT_EQ(layout_overrides(config, {2, 1, 1, 1, 1}, 2, true),
            "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=1 "
            "model.virtual_pipeline_model_parallel_size=1 trainer.devices=2 trainer.num_nodes=1");
}

}  // namespace
}  // namespace adamant::train
