// The key/value-cache decoder on the CPU against the model recomputing the whole prefix
// (GptModel::next_token_logits), with fp32 matrices and with bf16 ones (the default: the
// model's weights are then rounded to bf16 first, so that both paths multiply the same
// values), and the decoding kernels against plain attention.
#include "adamant/model/gpt_decoder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "adamant/core/half.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/decode.h"
#include "adamant/model/generation.h"
#include "adamant/model/sampler.h"
#include "model_test_util.h"

namespace adamant::model {
namespace {

GptConfig decoder_config() {
  GptConfig config = testing::tiny_config();
  config.seq_length = 24;
  config.init_method_std = 0.3f;  // spread-out logits: greedy choices are not near ties
  return config;
}

// Rounds every weight of an fp32 model to bf16: what the decoder's bf16 matrices hold.
void round_weights_to_bf16(GptModel& model) {
  float* w = model.weights().ptr<float>();
  for (std::size_t i = 0; i < model.buffer_numel(); ++i) w[i] = bf16_to_f32(f32_to_bf16(w[i]));
}

void expect_logits_near(std::span<const float> got, std::span<const float> expected, const char* what) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t v = 0; v < got.size(); ++v) {
    ASSERT_NEAR(got[v], expected[v], 1e-4 * (1.0 + std::fabs(expected[v]))) << what << " logit " << v;
  }
}

void expect_cached_logits_equal_recomputed(GptModel& model, DType matrix_dtype) {
  const std::vector<std::vector<std::int32_t>> prompts{{3, 14, 15, 9}, {26}, {5, 35, 8}};
  GptDecoder decoder(model, 3, 4, 20, matrix_dtype);
  std::vector<std::vector<std::int32_t>> contexts = prompts;
  std::vector<float> expected(static_cast<std::size_t>(decoder.padded_vocab()));
  for (int b = 0; b < 3; ++b) {
    decoder.prefill(b, prompts[static_cast<std::size_t>(b)]);
    model.next_token_logits(prompts[static_cast<std::size_t>(b)], expected);
    expect_logits_near(decoder.logits(b), expected, "prefill");
  }
  for (int step = 0; step < 12; ++step) {
    std::vector<std::int32_t> tokens;
    for (int b = 0; b < 3; ++b) tokens.push_back(static_cast<std::int32_t>((7 * step + 11 * b) % 60));
    decoder.step(tokens);
    for (int b = 0; b < 3; ++b) {
      auto& context = contexts[static_cast<std::size_t>(b)];
      context.push_back(tokens[static_cast<std::size_t>(b)]);
      EXPECT_EQ(decoder.length(b), static_cast<int>(context.size()));
      model.next_token_logits(context, expected);
      expect_logits_near(decoder.logits(b), expected, "step");
    }
  }
}

TEST(GptDecoder, CachedLogitsEqualRecomputedPrefixWithFp32Matrices) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 5);
  expect_cached_logits_equal_recomputed(model, DType::f32);
}

TEST(GptDecoder, CachedLogitsEqualRecomputedPrefixWithBf16Matrices) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 5);
  round_weights_to_bf16(model);
  expect_cached_logits_equal_recomputed(model, DType::bf16);
}

// The bf16 matrices are the model's weights rounded: a model that is not bf16-valued gives
// logits within bf16's rounding of the fp32 ones, and not equal to them.
TEST(GptDecoder, Bf16MatricesRoundTheModelsWeights) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 5);
  const std::vector<std::int32_t> prompt{3, 14, 15, 9};
  GptDecoder decoder(model, 1, 4, 8);
  decoder.prefill(0, prompt);
  std::vector<float> expected(static_cast<std::size_t>(decoder.padded_vocab()));
  model.next_token_logits(prompt, expected);
  double worst = 0.0;
  for (std::size_t v = 0; v < expected.size(); ++v) {
    const double error = std::fabs(decoder.logits(0)[v] - expected[v]);
    EXPECT_LE(error, 0.05 * (1.0 + std::fabs(expected[v]))) << "logit " << v;
    worst = std::max(worst, error);
  }
  EXPECT_GT(worst, 1e-6);
}

// Top-k candidates picked by the decoder are the k largest logits, in sample_token's order.
TEST(GptDecoder, SelectTopGivesTheLargestLogitsInOrder) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 6);
  round_weights_to_bf16(model);
  GptDecoder decoder(model, 2, 3, 8);
  decoder.prefill(0, std::vector<std::int32_t>{1, 2, 3});
  decoder.prefill(1, std::vector<std::int32_t>{9});
  decoder.select_top(7, 60, 4);
  for (int b = 0; b < 2; ++b) {
    const auto logits = decoder.logits(b);
    std::vector<std::int32_t> order;
    for (std::int32_t v = 0; v < 60; ++v)
      if (v != 4) order.push_back(v);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t c) { return logits[a] > logits[c]; });
    const GptDecoder::Candidates top = decoder.candidates(b);
    ASSERT_EQ(top.ids.size(), 7u);
    for (std::size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(top.ids[i], order[i]) << "sequence " << b << " place " << i;
      EXPECT_EQ(top.logits[i], logits[order[i]]);
    }
  }
}

TEST(GptDecoder, GreedyWithCacheEqualsGreedyWithout) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 8);
  round_weights_to_bf16(model);
  const std::vector<std::vector<std::int32_t>> prompts{{1, 2, 3}, {40, 41}};
  GenerationOptions options;
  options.max_new_tokens = 18;
  options.temperature = 0.0f;
  options.vocab_size = 60;
  GptDecoder decoder(model, 2, 3, decoder_capacity_for(prompts, options.max_new_tokens));
  std::vector<std::vector<std::int32_t>> streamed(2);
  const auto cached = generate_cached(decoder, prompts, options, [&](int sequence, std::int32_t token) {
    streamed[static_cast<std::size_t>(sequence)].push_back(token);
  });
  ASSERT_EQ(cached.size(), 2u);
  for (std::size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(cached[b], generate(model, prompts[b], options.max_new_tokens, 0.0f, 0, 1, 60)) << "sequence " << b;
    EXPECT_EQ(streamed[b], cached[b]);
  }
}

TEST(GptDecoder, SampledTokensFollowTheSeedPerSequence) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 8);
  round_weights_to_bf16(model);
  GenerationOptions options;
  options.max_new_tokens = 10;
  options.temperature = 1.0f;
  options.top_k = 0;
  options.vocab_size = 60;
  options.seed = 99;
  const std::vector<std::vector<std::int32_t>> one{{7, 8}};
  GptDecoder single(model, 1, 2, 11);
  const auto alone = generate_cached(single, one, options);
  // Sequence 0 of a batch draws what it draws alone, and what generate() without a cache draws.
  const std::vector<std::vector<std::int32_t>> two{{7, 8}, {9}};
  GptDecoder pair(model, 2, 2, 11);
  EXPECT_EQ(generate_cached(pair, two, options)[0], alone[0]);
  EXPECT_EQ(alone[0], generate(model, one[0], options.max_new_tokens, 1.0f, 0, 99, 60));
  // Top-k draws take the decoder's candidates instead of the whole row: the same tokens.
  options.top_k = 5;
  options.top_p = 0.9f;
  EXPECT_EQ(generate_cached(pair, two, options)[0], generate_cached(single, one, options)[0]);
  std::vector<std::int32_t> context = one[0], expected;
  std::vector<float> logits(static_cast<std::size_t>(single.padded_vocab()));
  std::vector<std::int32_t> scratch;
  for (int step = 0; step < options.max_new_tokens; ++step) {
    model.next_token_logits(context, logits);
    expected.push_back(
        sample_token(logits, 60, 1.0f, 5, sampling_uniform(options.seed, 0, step), scratch, options.top_p));
    context.push_back(expected.back());
  }
  EXPECT_EQ(generate_cached(single, one, options)[0], expected);
}

TEST(GptDecoder, EndOfDocumentStopsOnlyAfterMinTokens) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 8);
  round_weights_to_bf16(model);
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.temperature = 0.0f;
  options.vocab_size = 60;
  const std::vector<std::vector<std::int32_t>> prompts{{1, 2}};
  GptDecoder decoder(model, 1, 2, decoder_capacity_for(prompts, options.max_new_tokens));
  const auto free_run = generate_cached(decoder, prompts, options)[0];
  ASSERT_EQ(free_run.size(), 12u);
  options.end_of_document = free_run[3];  // pretend the fourth greedy token ends the document
  const auto stopped = generate_cached(decoder, prompts, options)[0];
  const std::size_t first_end =
      static_cast<std::size_t>(std::find(free_run.begin(), free_run.end(), free_run[3]) - free_run.begin());
  EXPECT_EQ(stopped, std::vector<std::int32_t>(free_run.begin(), free_run.begin() + first_end));
  options.min_new_tokens = 12;
  const auto forced = generate_cached(decoder, prompts, options)[0];
  EXPECT_EQ(forced.size(), 12u);
  EXPECT_EQ(std::count(forced.begin(), forced.end(), free_run[3]), 0);
}

TEST(GptDecoder, RefusesWhatItCannotHold) {
  GptModel model(decoder_config(), DType::f32, 1, Device::cpu(), 8);
  EXPECT_THROW(GptDecoder(model, 1, 4, 25), Error);  // beyond seq_length 24
  EXPECT_THROW(GptDecoder(model, 0, 4, 8), Error);
  GptDecoder decoder(model, 1, 4, 5);
  EXPECT_THROW(decoder.prefill(0, std::vector<std::int32_t>{1, 2, 3, 4, 5}), Error);
  EXPECT_THROW(decoder.prefill(0, std::vector<std::int32_t>{60}), Error);
  decoder.prefill(0, std::vector<std::int32_t>{1, 2, 3, 4});
  decoder.step(std::vector<std::int32_t>{5});
  EXPECT_THROW(decoder.step(std::vector<std::int32_t>{6}), Error);  // the cache of 5 is full
  GptModel bf16_model(decoder_config(), DType::bf16, 1, Device::cpu(), 8);
  EXPECT_THROW(GptDecoder(bf16_model, 1, 4, 8), Error);
  EXPECT_THROW(GptDecoder(model, 1, 4, 8, DType::f16), Error);
  EXPECT_THROW(decoder.select_top(0, 60, -1), Error);
  EXPECT_THROW(decoder.select_top(3, 65, -1), Error);  // beyond the padded vocabulary of 64
}

// decode_attention for one new row equals the last row of full causal attention over the sequence.
TEST(DecodeAttention, EqualsLastRowOfCausalAttention) {
  const std::int64_t B = 2, L = 6, H = 3, D = 5, W = H * D, capacity = 8;
  std::vector<double> qkv(static_cast<std::size_t>(B * L * 3 * W));
  for (std::size_t i = 0; i < qkv.size(); ++i) qkv[i] = std::sin(0.37 * static_cast<double>(i) + 0.1);
  std::vector<double> probs(static_cast<std::size_t>(B * H * L * L)), full(static_cast<std::size_t>(B * L * W));
  kernels::cpu::attention_forward(Tensor::flat(qkv.data(), DType::f64, Device::cpu(), qkv.size()),
                                  Tensor::flat(probs.data(), DType::f64, Device::cpu(), probs.size()),
                                  Tensor::flat(full.data(), DType::f64, Device::cpu(), full.size()), {B, L, H, D},
                                  kernels::DropoutArgs{});
  // The cache holds the first L - 1 rows of each sequence; the last row comes as the new token.
  std::vector<double> cache(static_cast<std::size_t>(B * capacity * 3 * W), 1e30),
      fresh(static_cast<std::size_t>(B * 3 * W));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < L; ++t) {
      const double* row = qkv.data() + (b * L + t) * 3 * W;
      double* target = t + 1 < L ? cache.data() + (b * capacity + t) * 3 * W : fresh.data() + b * 3 * W;
      std::copy(row, row + 3 * W, target);
    }
  }
  std::vector<std::int32_t> positions(static_cast<std::size_t>(B), static_cast<std::int32_t>(L - 1));
  std::vector<double> out(static_cast<std::size_t>(B * W));
  kernels::decode_attention(Tensor::flat(fresh.data(), DType::f64, Device::cpu(), fresh.size()),
                            Tensor::flat(cache.data(), DType::f64, Device::cpu(), cache.size()),
                            Tensor::flat(positions.data(), DType::i32, Device::cpu(), positions.size()),
                            Tensor::flat(out.data(), DType::f64, Device::cpu(), out.size()), {B, capacity, H, D},
                            Stream{});
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t i = 0; i < W; ++i) {
      EXPECT_NEAR(out[static_cast<std::size_t>(b * W + i)], full[static_cast<std::size_t>((b * L + L - 1) * W + i)],
                  1e-12);
    }
    // The new key and value were stored at position L - 1.
    for (std::int64_t i = W; i < 3 * W; ++i) {
      EXPECT_EQ(cache[static_cast<std::size_t>((b * capacity + L - 1) * 3 * W + i)],
                fresh[static_cast<std::size_t>(b * 3 * W + i)]);
    }
  }
  positions[0] = static_cast<std::int32_t>(capacity);  // outside the cache
  EXPECT_THROW(kernels::decode_attention(Tensor::flat(fresh.data(), DType::f64, Device::cpu(), fresh.size()),
                                         Tensor::flat(cache.data(), DType::f64, Device::cpu(), cache.size()),
                                         Tensor::flat(positions.data(), DType::i32, Device::cpu(), positions.size()),
                                         Tensor::flat(out.data(), DType::f64, Device::cpu(), out.size()),
                                         {B, capacity, H, D}, Stream{}),
               Error);
}

TEST(DecodeEmbedding, AddsTheRowsOfEachTokenAndPosition) {
  const std::int64_t V = 4, P = 3, C = 2;
  std::vector<float> word(static_cast<std::size_t>(V * C)), position(static_cast<std::size_t>(P * C));
  for (std::size_t i = 0; i < word.size(); ++i) word[i] = static_cast<float>(i);
  for (std::size_t i = 0; i < position.size(); ++i) position[i] = 100.0f * static_cast<float>(i);
  std::vector<std::int32_t> tokens{3, 0}, positions{1, 2};
  std::vector<float> out(4);
  auto view = [](auto& v, DType dtype) { return Tensor::flat(v.data(), dtype, Device::cpu(), v.size()); };
  kernels::decode_embedding(view(tokens, DType::i32), view(positions, DType::i32), view(word, DType::f32),
                            view(position, DType::f32), view(out, DType::f32), 2, C, Stream{});
  EXPECT_EQ(out, (std::vector<float>{6.0f + 200.0f, 7.0f + 300.0f, 0.0f + 400.0f, 1.0f + 500.0f}));
  tokens[1] = 4;
  EXPECT_THROW(kernels::decode_embedding(view(tokens, DType::i32), view(positions, DType::i32), view(word, DType::f32),
                                         view(position, DType::f32), view(out, DType::f32), 2, C, Stream{}),
               Error);
}

}  // namespace
}  // namespace adamant::model
