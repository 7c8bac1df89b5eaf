#include "adamant/model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.h"

namespace adamant::model {
namespace {

GptModel sampling_model() {
  GptConfig config = testing::tiny_config();
  config.init_method_std = 0.5f;  // spread-out logits
  return GptModel(config, DType::f32, 1, Device::cpu(), 21);
}

TEST(Sampler, SameSeedSameTokens) {
  GptModel model = sampling_model();
  const std::vector<std::int32_t> prompt{1, 2, 3};
  const auto a = generate(model, prompt, 20, 1.0f, 0, 77, 60);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(generate(model, prompt, 20, 1.0f, 0, 77, 60), a);
  EXPECT_NE(generate(model, prompt, 20, 1.0f, 0, 78, 60), a);
}

TEST(Sampler, GreedyIsArgmax) {
  GptModel model = sampling_model();
  const std::vector<std::int32_t> prompt{5};
  const int count = 12;  // runs past seq_length 8: the context window slides
  std::vector<std::int32_t> context = prompt, expected;
  std::vector<float> logits(64);
  for (int i = 0; i < count; ++i) {
    const std::size_t window = std::min<std::size_t>(context.size(), 8);
    model.next_token_logits(std::span(context).last(window), logits);
    const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.begin() + 60) - logits.begin());
    expected.push_back(best);
    context.push_back(best);
  }
  EXPECT_EQ(generate(model, prompt, count, 0.0f, 0, 1, 60), expected);
  EXPECT_EQ(generate(model, prompt, count, 1.0f, 1, 2, 60), expected);
  EXPECT_EQ(generate(model, prompt, count, 1e-6f, 0, 3, 60), expected);
}

TEST(Sampler, NeverSamplesPaddingIds) {
  GptModel model = sampling_model();
  // Make padding rows 60..63 of the tied embedding win every argmax: the final layernorm
  // outputs its bias u for every token, and padding rows are 10 u.
  const ParamList& params = model.params();
  auto weights = model.weights().span<float>();
  const ParamSpec& ln_w = params[params.index_of("decoder.final_layernorm.weight")];
  const ParamSpec& ln_b = params[params.index_of("decoder.final_layernorm.bias")];
  const ParamSpec& word = params[params.index_of("embedding.word_embeddings.weight")];
  for (std::size_t c = 0; c < 16; ++c) {
    weights[ln_w.offset + c] = 0.0f;
    weights[ln_b.offset + c] = (c % 2 ? 1.0f : -1.0f);
    for (std::size_t row = 60; row < 64; ++row) weights[word.offset + row * 16 + c] = 10.0f * weights[ln_b.offset + c];
  }
  std::vector<float> logits(64);
  model.next_token_logits(std::vector<std::int32_t>{0}, logits);
  ASSERT_GE(std::max_element(logits.begin(), logits.end()) - logits.begin(), 60);
  for (const float temperature : {0.0f, 1.0f, 50.0f}) {
    for (const std::int32_t token : generate(model, std::vector<std::int32_t>{0}, 30, temperature, 0, 4, 60)) {
      EXPECT_LT(token, 60);
    }
  }
  for (const std::int32_t token : generate(model, std::vector<std::int32_t>{0}, 30, 1.0f, 0, 5, 10)) {
    EXPECT_LT(token, 10);
  }
}

TEST(Sampler, InverseCdfFollowsSoftmaxTopKAndTemperature) {
  // softmax([0, ln 2, ln 3, ln 4]) = [0.1, 0.2, 0.3, 0.4]; an even sweep of uniforms
  // lands in each token in proportion.
  const std::vector<float> logits{0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f), 100.0f};
  std::vector<std::int32_t> scratch;
  auto counts = [&](float temperature, int top_k) {
    std::vector<int> hits(5);
    for (int i = 0; i < 1000; ++i) ++hits[sample_token(logits, 4, temperature, top_k, (i + 0.5) / 1000, scratch)];
    return hits;
  };
  const auto plain = counts(1.0f, 0);
  EXPECT_EQ(plain, (std::vector<int>{100, 200, 300, 400, 0}));  // id 4 is beyond vocab_size
  const auto top2 = counts(1.0f, 2);                            // [3/7, 4/7] over ids 2, 3
  EXPECT_EQ(top2[0] + top2[1], 0);
  EXPECT_NEAR(top2[2], 1000.0 * 3 / 7, 1.0);
  const auto hot = counts(2.0f, 0);  // proportional to sqrt(1..4)
  const double norm = 1 + std::sqrt(2.0) + std::sqrt(3.0) + 2;
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(hot[v], 1000.0 * std::sqrt(v + 1.0) / norm, 1.0) << v;
}

}  // namespace
}  // namespace adamant::model
