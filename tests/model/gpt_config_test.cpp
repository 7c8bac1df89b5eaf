#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "adamant/model/param_layout.h"
#include "model_test_util.h"

namespace adamant::model {
namespace {

std::string error_of(const GptConfig& config) {
  try {
    config.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GptConfig, PadsVocabularyLikeMegatron) {
  GptConfig config = testing::tiny_config();
  config.vocab_size = 50257;
  config.make_vocab_size_divisible_by = 128;
  EXPECT_EQ(config.padded_vocab_size(), 50304);
  config.tensor_parallel_size = 2;
  EXPECT_EQ(config.padded_vocab_size(), 50432);  // next multiple of 256
  config.vocab_size = 256;
  EXPECT_EQ(config.padded_vocab_size(), 256);
}

TEST(GptConfig, ErrorsNameTheNemoKey) {
  GptConfig config = testing::tiny_config();
  EXPECT_EQ(error_of(config), "");
  config.num_attention_heads = 3;
  EXPECT_NE(error_of(config).find("model.num_attention_heads"), std::string::npos);
  config = testing::tiny_config();
  config.seq_length = 0;
  EXPECT_NE(error_of(config).find("model.encoder_seq_length"), std::string::npos);
  config = testing::tiny_config();
  config.hidden_dropout = 1.0f;
  EXPECT_NE(error_of(config).find("model.hidden_dropout"), std::string::npos);
  config = testing::tiny_config();
  config.ffn_hidden_size = 0;
  EXPECT_NE(error_of(config).find("model.ffn_hidden_size"), std::string::npos);
  config = testing::tiny_config();
  config.sequence_parallel = true;  // without tensor parallelism
  EXPECT_NE(error_of(config).find("model.sequence_parallel is true but model.tensor_model_parallel_size is 1"),
            std::string::npos);
  config.tensor_parallel_size = 2;
  config.seq_length = 7;  // not divisible by the tensor-parallel size
  EXPECT_NE(error_of(config).find("model.encoder_seq_length (7) divisible by model.tensor_model_parallel_size (2)"),
            std::string::npos);
  config = testing::tiny_config();
  config.tensor_parallel_size = 4;  // more than the 2 heads
  EXPECT_NE(error_of(config).find("model.tensor_model_parallel_size 4 must divide model.num_attention_heads 2"),
            std::string::npos);
  config = testing::tiny_config();
  config.tensor_parallel_size = 2;  // a valid config; the model needs its tensor-parallel group (tensor_parallel_test)
  EXPECT_EQ(error_of(config), "");
  EXPECT_THROW(GptModel(config, DType::f32, 1, Device::cpu(), 1), Error);
  config.cuda_graph = true;  // valid too: tensor-parallel passes run directly (RunSetup's line says so)
  EXPECT_EQ(error_of(config), "");
}

// MFU's FLOPs per token, 6 N + 12 layers seq hidden, with N counted by hand for the tiny
// config, and the same N at tensor parallel 2 (the count is of the whole model).
TEST(ParamList, ModelFlopsPerTokenCountsTheWholeModel) {
  GptConfig config = testing::tiny_config();
  const double hidden = 16, ffn = 64, vocab = 64, seq = 8, layers = 2;
  const double per_layer =
      4 * hidden + 3 * hidden * hidden + 3 * hidden + hidden * hidden + hidden + 2 * hidden * ffn + ffn + hidden;
  const double parameters = vocab * hidden + seq * hidden + layers * per_layer + 2 * hidden;
  EXPECT_EQ(whole_model_parameters(config), static_cast<std::int64_t>(parameters));
  EXPECT_DOUBLE_EQ(model_flops_per_token(config), 6 * parameters + 12 * layers * seq * hidden);
  config.tensor_parallel_size = 2;
  EXPECT_EQ(whole_model_parameters(config), static_cast<std::int64_t>(parameters));
}

// The workspace's room for a weight gradient (GptConfig::largest_linear_weight) against a
// rank's parameter list: the largest two-dimensional weight that is not an embedding, with
// the attention's or the MLP's weights the larger, on one rank and on two tensor-parallel ones.
TEST(GptConfig, LargestLinearWeightIsTheLargestOfARanksLayerWeights) {
  for (const int ffn : {64, 24}) {  // the MLP's weights larger, then qkv's
    for (const int tp : {1, 2}) {
      GptConfig config = testing::tiny_config();
      config.ffn_hidden_size = ffn;
      config.tensor_parallel_size = tp;
      std::int64_t largest = 0;
      for (const ParamSpec& spec : build_param_list(config).params) {
        if (spec.shape.size() != 2 || spec.name.find("embedding") != std::string::npos) continue;
        largest = std::max(largest, static_cast<std::int64_t>(spec.numel));
      }
      EXPECT_GT(largest, 0);
      EXPECT_EQ(config.largest_linear_weight(), largest) << "ffn " << ffn << ", tensor-parallel " << tp;
    }
  }
}

TEST(ParamList, ReverseOrderOfUseContiguousOffsets) {
  const GptConfig config = testing::tiny_config();
  const ParamList list = build_param_list(config);
  const std::size_t hidden = 16, ffn = 64, vocab = 64, seq = 8;
  const std::size_t per_layer =
      4 * hidden + 3 * hidden * hidden + 3 * hidden + hidden * hidden + hidden + 2 * hidden * ffn + ffn + hidden;
  EXPECT_EQ(list.total_numel, vocab * hidden + seq * hidden + 2 * per_layer + 2 * hidden);
  ASSERT_EQ(list.size(), 4u + 12u * 2u);
  EXPECT_EQ(list[0].name, "decoder.final_layernorm.bias");
  EXPECT_EQ(list[1].name, "decoder.final_layernorm.weight");
  EXPECT_EQ(list[2].name, "decoder.layers.1.mlp.dense_4h_to_h.bias");
  EXPECT_EQ(list[list.size() - 2].name, "embedding.position_embeddings.weight");
  EXPECT_EQ(list[list.size() - 1].name, "embedding.word_embeddings.weight");
  EXPECT_EQ(list[list.size() - 1].shape, (std::vector<std::int64_t>{64, 16}));
  std::size_t offset = 0;
  for (const ParamSpec& spec : list.params) {
    EXPECT_EQ(spec.offset, offset) << spec.name;
    offset += spec.numel;
    const bool no_decay = spec.name.ends_with(".bias") || spec.name.find("layernorm") != std::string::npos;
    EXPECT_EQ(spec.weight_decay, !no_decay) << spec.name;
  }
  const auto qkv = list[list.index_of("decoder.layers.0.self_attention.query_key_value.weight")];
  EXPECT_EQ(qkv.shape, (std::vector<std::int64_t>{48, 16}));
  EXPECT_TRUE(list[list.index_of("decoder.layers.0.self_attention.dense.bias")].tp_duplicate);
  EXPECT_FALSE(list[list.index_of("decoder.layers.0.self_attention.query_key_value.bias")].tp_duplicate);
}

// Every element of every rank's slice is found again at its place: locate() inverts global_index(),
// and the slices of the ranks cover the whole parameter once.
TEST(TensorParallelSlice, LocateInvertsGlobalIndex) {
  for (const int tp : {2, 4}) {
    GptConfig config = testing::two_layer_config(32, 4, 8, 60);
    config.make_vocab_size_divisible_by = 8;
    config.tensor_parallel_size = tp;
    for (const ParamSpec& spec : build_param_list(config).params) {
      const TensorParallelSlice slice = tensor_parallel_slice(config, spec);
      if (slice.split == TensorParallelSplit::replicated) continue;
      std::vector<int> seen(spec.numel * static_cast<std::size_t>(tp), 0);
      for (int rank = 0; rank < tp; ++rank) {
        for (std::size_t i = 0; i < spec.numel; ++i) {
          const std::size_t global = slice.global_index(i, rank, tp);
          ASSERT_LT(global, seen.size()) << spec.name;
          seen[global] += 1;
          const auto [owner, local] = slice.locate(global, tp);
          ASSERT_EQ(owner, rank) << spec.name << " element " << i;
          ASSERT_EQ(local, i) << spec.name << " element " << i;
        }
      }
      for (const int count : seen) ASSERT_EQ(count, 1) << spec.name;
    }
  }
}

TEST(GptModel, InitFollowsTheSpecAndDependsOnlyOnSeed) {
  GptConfig config = testing::tiny_config();
  config.num_layers = 3;
  config.hidden_size = 64;
  config.num_attention_heads = 4;
  config.ffn_hidden_size = 256;
  GptModel model(config, DType::f64, 1, Device::cpu(), 5);
  const auto weights = testing::copy_of<double>(model.weights());
  auto stddev = [&](const std::string& name) {
    const ParamSpec& spec = model.params()[model.params().index_of(name)];
    double sum_sq = 0;
    for (std::size_t i = 0; i < spec.numel; ++i) sum_sq += weights[spec.offset + i] * weights[spec.offset + i];
    return std::sqrt(sum_sq / static_cast<double>(spec.numel));
  };
  EXPECT_NEAR(stddev("decoder.layers.1.mlp.dense_h_to_4h.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("embedding.word_embeddings.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("decoder.layers.1.mlp.dense_4h_to_h.weight"), 0.02 / std::sqrt(6.0), 0.0005);
  EXPECT_NEAR(stddev("decoder.layers.2.self_attention.dense.weight"), 0.02 / std::sqrt(6.0), 0.0005);
  const ParamSpec& ln = model.params()[model.params().index_of("decoder.layers.0.input_layernorm.weight")];
  const ParamSpec& bias = model.params()[model.params().index_of("decoder.layers.0.mlp.dense_h_to_4h.bias")];
  for (std::size_t i = 0; i < ln.numel; ++i) EXPECT_EQ(weights[ln.offset + i], 1.0);
  for (std::size_t i = 0; i < bias.numel; ++i) EXPECT_EQ(weights[bias.offset + i], 0.0);

  GptModel same(config, DType::f64, 4, Device::cpu(), 5);  // other micro-batch size: same weights
  EXPECT_EQ(testing::copy_of<double>(same.weights()), weights);
  GptModel other(config, DType::f64, 1, Device::cpu(), 6);
  EXPECT_NE(testing::copy_of<double>(other.weights()), weights);
  // fp32 weights are the fp64 ones rounded.
  GptModel single(config, DType::f32, 1, Device::cpu(), 5);
  const auto weights32 = testing::copy_of<float>(single.weights());
  for (std::size_t i = 0; i < weights.size(); i += 97) EXPECT_EQ(weights32[i], static_cast<float>(weights[i]));
}

}  // namespace
}  // namespace adamant::model
