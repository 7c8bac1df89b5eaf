// Pipeline stages in one process: the stages of a split model, run pass by pass with the
// activations and their gradients copied from stage to stage as the schedule's sends would,
// compute the whole model's losses and gradients.
#include "adamant/model/pipeline_stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "adamant/core/error.h"
#include "adamant/model/param_layout.h"
#include "model_test_util.h"

namespace adamant::model {
namespace {

using testing::random_batch;

GptConfig four_layer_config(int stages, int chunks) {
  GptConfig config = testing::tiny_config();
  config.num_layers = 4;
  config.hidden_dropout = config.attention_dropout = 0.1f;  // the masks must follow the whole model's layers
  config.pipeline_parallel_size = stages;
  config.virtual_pipeline_size = chunks;
  return config;
}

TEST(PipelineStage, InterleavedChunksTakeEveryPthBlockOfLayers) {
  GptConfig config = four_layer_config(2, 2);
  config.num_layers = 8;
  const PipelineStage first = pipeline_stage(config, 0), last = pipeline_stage(config, 1);
  ASSERT_EQ(first.chunks.size(), 2u);
  EXPECT_EQ(first.chunks[0].first_layer, 0);
  EXPECT_EQ(first.chunks[1].first_layer, 4);
  EXPECT_EQ(last.chunks[0].first_layer, 2);
  EXPECT_EQ(last.chunks[1].first_layer, 6);
  for (const auto& chunk : {first.chunks[0], first.chunks[1], last.chunks[0], last.chunks[1]}) {
    EXPECT_EQ(chunk.num_layers, 2);
  }
  EXPECT_TRUE(first.chunks[0].has_embedding && !first.chunks[1].has_head);
  EXPECT_TRUE(last.chunks[1].has_head && !last.chunks[0].has_embedding);
  EXPECT_FALSE(first.holds_tied_copy());
  EXPECT_TRUE(last.holds_tied_copy());

  // Every parameter of the whole model on exactly one stage, plus the last stage's tied copy.
  std::map<std::string, int> owners;
  std::size_t tied = 0;
  for (const PipelineStage& stage : {first, last}) {
    for (const ParamSpec& spec : build_stage_param_list(config, stage).params) {
      if (spec.tied_copy) {
        ++tied;
        EXPECT_EQ(spec.name, "embedding.word_embeddings.weight");
        continue;
      }
      owners[spec.name] += 1;
    }
  }
  EXPECT_EQ(tied, 1u);
  const ParamList whole = build_param_list(config);
  ASSERT_EQ(owners.size(), whole.size());
  for (const ParamSpec& spec : whole.params) EXPECT_EQ(owners[spec.name], 1) << spec.name;
}

TEST(PipelineStage, LayoutsThatCannotSplitNameTheKeys) {
  GptConfig config = four_layer_config(3, 1);
  try {
    config.validate();
    FAIL() << "4 layers over 3 stages accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("model.num_layers"), std::string::npos) << message;
    EXPECT_NE(message.find("model.pipeline_model_parallel_size"), std::string::npos) << message;
  }
  config = four_layer_config(1, 2);
  try {
    config.validate();
    FAIL() << "virtual stages without pipeline stages accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.virtual_pipeline_model_parallel_size"), std::string::npos) << e.what();
  }
}

void copy_tensor(const Tensor& from, const Tensor& to) {
  ASSERT_EQ(from.bytes(), to.bytes());
  std::memcpy(to.data, from.data, from.bytes());
}

// Losses and gradients of two micro-batches, both in flight at once, through the stages of
// `config` chained in one process; compared with the whole model's.
void expect_stages_match_whole_model(const GptConfig& config) {
  const GptConfig whole_config = config.whole_model();
  const auto batch = random_batch(config, 4, 17);
  constexpr std::uint64_t kSeed = 23;
  GptModel whole(whole_config, DType::f64, 2, Device::cpu(), kSeed);
  whole.zero_grads();
  double whole_loss[2];
  for (int m = 0; m < 2; ++m) whole_loss[m] = whole.forward_backward(batch.view(2 * m, 2 * m, 2), 2.0f);

  std::vector<std::unique_ptr<GptModel>> stages;
  for (int s = 0; s < config.pipeline_parallel_size; ++s) {
    stages.push_back(std::make_unique<GptModel>(config, DType::f64, 2, Device::cpu(), kSeed, 0, nullptr, s,
                                                2 * config.virtual_pipeline_size));
    testing::poison_and_discard_grads(*stages.back());  // what the stages' backwards must write over
  }
  const auto losses = testing::run_chained_stages(stages, batch, 2.0f, copy_tensor);
  for (int m = 0; m < 2; ++m) EXPECT_EQ(losses[static_cast<std::size_t>(m)], whole_loss[m]) << "micro-batch " << m;

  const auto whole_grads = whole.grads().span<double>();
  std::map<std::string, std::vector<double>> summed;  // the tied copies' gradients add up
  for (const auto& stage : stages) {
    testing::add_stage_grads(summed, stage->params(), std::span<const double>(stage->grads().span<double>()));
  }
  ASSERT_EQ(summed.size(), whole.params().size());
  for (const ParamSpec& spec : whole.params().params) {
    const std::span<const double> expected = std::span<const double>(whole_grads).subspan(spec.offset, spec.numel);
    double max_value = 0;
    for (const double value : expected) max_value = std::max(max_value, std::abs(value));
    // NaN where the stages left a gradient unwritten, which fails the check
    EXPECT_LE(testing::max_abs_difference(summed[spec.name], expected), 1e-12 * std::max(1.0, max_value)) << spec.name;
  }
}

TEST(PipelineStage, TwoStagesComputeTheWholeModel) { expect_stages_match_whole_model(four_layer_config(2, 1)); }

TEST(PipelineStage, FourStagesComputeTheWholeModel) { expect_stages_match_whole_model(four_layer_config(4, 1)); }

TEST(PipelineStage, InterleavedChunksComputeTheWholeModel) { expect_stages_match_whole_model(four_layer_config(2, 2)); }

TEST(PipelineStage, StagesStartFromTheWholeModelsWeights) {
  const GptConfig config = four_layer_config(2, 2);
  GptModel whole(config.whole_model(), DType::f32, 1, Device::cpu(), 5);
  const auto whole_weights = whole.weights().span<float>();
  for (int s = 0; s < 2; ++s) {
    GptModel stage(config, DType::f32, 1, Device::cpu(), 5, 0, nullptr, s);
    const auto weights = stage.weights().span<float>();
    for (const ParamSpec& spec : stage.params().params) {
      const ParamSpec& same = whole.params()[whole.params().index_of(spec.name)];
      for (std::size_t i = 0; i < spec.numel; ++i) {
        ASSERT_EQ(weights[spec.offset + i], whole_weights[same.offset + i]) << spec.name;
      }
    }
  }
}

}  // namespace
}  // namespace adamant::model
