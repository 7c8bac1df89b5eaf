// The key/value-cache decoder on a GPU (bf16, flash attention for the prompt, the CUDA
// decode-attention kernel, a CUDA graph per step) against the CPU decoder holding the same
// bf16-rounded weights in fp32, and greedy decoding with the cache against greedy decoding
// that recomputes the whole prefix on the GPU. The CUDA decoding kernels against the CPU ones.
//
// Tolerance: each layer rounds its activations to bf16 about ten times (2^-9 relative each);
// over two layers and the classifier the logits agree to a few 1e-2 absolute for logits of
// order one, so 8e-2 + 3e-2 relative is the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/device.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/decode.h"
#include "adamant/model/generation.h"
#include "adamant/model/sampler.h"
#include "model_test_util.h"

namespace adamant::model {
namespace {

#define ADAMANT_REQUIRE_GPU()                                        \
  do {                                                               \
    if (!::adamant::cuda_available()) GTEST_SKIP() << "no CUDA GPU"; \
  } while (false)

Device gpu() { return Device::cuda(0); }

// head_dim 64 (the flash attention kernel's smallest), the GPT-2 vocabulary padded to 50304.
GptConfig decoder_gpu_config() {
  GptConfig config;
  config.num_layers = 2;
  config.hidden_size = 128;
  config.num_attention_heads = 2;
  config.ffn_hidden_size = 512;
  config.seq_length = 96;
  config.vocab_size = 50257;
  config.init_method_std = 0.1f;
  config.hidden_dropout = config.attention_dropout = 0.0f;  // GptConfig defaults to NeMo's 0.1
  return config;
}

// The CPU model in fp32 with the GPU model's bf16 weights.
void copy_weights_to_cpu(GptModel& gpu_model, GptModel& cpu_model) {
  std::vector<std::uint16_t> bits(gpu_model.buffer_numel());
  gpu_model.stream().synchronize();
  copy_bytes(bits.data(), Device::cpu(), gpu_model.weights().data, gpu(), bits.size() * sizeof(std::uint16_t));
  float* target = cpu_model.weights().ptr<float>();
  for (std::size_t i = 0; i < bits.size(); ++i) target[i] = bf16_to_f32(bits[i]);
}

void expect_close(std::span<const float> got, std::span<const float> expected, const char* what) {
  double worst = 0.0;
  for (std::size_t v = 0; v < 50257; ++v) {
    const double error = std::fabs(got[v] - expected[v]) / (8e-2 + 3e-2 * std::fabs(expected[v]));
    worst = std::max(worst, error);
  }
  EXPECT_LE(worst, 1.0) << what;
}

TEST(GpuDecoder, LogitsMatchTheCpuDecoder) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = decoder_gpu_config();
  GptModel gpu_model(config, DType::bf16, 1, gpu(), 3);
  GptModel cpu_model(config, DType::f32, 1, Device::cpu(), 3);
  copy_weights_to_cpu(gpu_model, cpu_model);
  const std::vector<std::vector<std::int32_t>> prompts{{464, 34799, 318, 257, 1263}, {1858, 373}};
  GptDecoder on_gpu(gpu_model, 2, 5, 40);
  GptDecoder on_cpu(cpu_model, 2, 5, 40);
  for (int b = 0; b < 2; ++b) {
    on_gpu.prefill(b, prompts[static_cast<std::size_t>(b)]);
    on_cpu.prefill(b, prompts[static_cast<std::size_t>(b)]);
    expect_close(on_gpu.logits(b), on_cpu.logits(b), "prefill");
  }
  // Enough steps for the step graph to be recorded and replayed.
  for (int step = 0; step < 20; ++step) {
    const std::vector<std::int32_t> tokens{(step * 1931 + 7) % 50257, (step * 409 + 3) % 50257};
    on_gpu.step(tokens);
    on_cpu.step(tokens);
    for (int b = 0; b < 2; ++b) expect_close(on_gpu.logits(b), on_cpu.logits(b), "step");
  }
}

// Greedy decoding with the cache against greedy decoding that recomputes the prefix on the GPU:
// at every step the cached choice is the uncached argmax, or (bf16 rounds the two paths
// differently) a token whose uncached logit is within kTieTolerance of the maximum. The
// sequences are compared step by step on the cached path's prefix, so one near-tie does not
// hide the steps after it.
TEST(GpuDecoder, GreedyWithCacheEqualsGreedyWithout) {
  ADAMANT_REQUIRE_GPU();
  constexpr float kTieTolerance = 0.1f;
  GptModel model(decoder_gpu_config(), DType::bf16, 1, gpu(), 11);
  const std::vector<std::vector<std::int32_t>> prompts{{464, 2068, 7586}};
  GenerationOptions options;
  options.max_new_tokens = 24;
  options.temperature = 0.0f;
  options.vocab_size = 50257;
  GptDecoder decoder(model, 1, 3, decoder_capacity_for(prompts, options.max_new_tokens));
  const auto cached = generate_cached(decoder, prompts, options)[0];
  ASSERT_EQ(cached.size(), 24u);
  std::vector<std::int32_t> context = prompts[0];
  std::vector<float> logits(static_cast<std::size_t>(decoder.padded_vocab()));
  int exact = 0;
  for (const std::int32_t token : cached) {
    model.next_token_logits(context, logits);
    const auto best = std::max_element(logits.begin(), logits.begin() + 50257) - logits.begin();
    exact += token == best ? 1 : 0;
    EXPECT_GE(logits[static_cast<std::size_t>(token)], logits[static_cast<std::size_t>(best)] - kTieTolerance)
        << "step " << context.size() - prompts[0].size();
    context.push_back(token);
  }
  EXPECT_GE(exact, 20) << "the cached path should pick the uncached argmax nearly always";
  // A second run replays the recorded step graph: the same tokens.
  EXPECT_EQ(generate_cached(decoder, prompts, options)[0], cached);
}

TEST(CudaDecodeKernels, AttentionAndEmbeddingMatchTheCpu) {
  ADAMANT_REQUIRE_GPU();
  for (const std::int64_t D : {64, 80, 128}) {
    const std::int64_t B = 3, H = 2, W = H * D, capacity = 300;
    const std::vector<std::int32_t> positions{0, 137, 299};
    std::vector<std::uint16_t> qkv_bits(static_cast<std::size_t>(B * 3 * W));
    std::vector<std::uint16_t> cache_bits(static_cast<std::size_t>(B * capacity * 3 * W));
    for (std::size_t i = 0; i < qkv_bits.size(); ++i) qkv_bits[i] = f32_to_bf16(std::sin(0.7f * i));
    for (std::size_t i = 0; i < cache_bits.size(); ++i) cache_bits[i] = f32_to_bf16(std::cos(0.013f * i) * 2.0f);
    std::vector<float> qkv(qkv_bits.size()), cache(cache_bits.size());
    std::transform(qkv_bits.begin(), qkv_bits.end(), qkv.begin(), bf16_to_f32);
    std::transform(cache_bits.begin(), cache_bits.end(), cache.begin(), bf16_to_f32);
    std::vector<float> expected(static_cast<std::size_t>(B * W));
    std::vector<std::int32_t> host_positions = positions;
    kernels::decode_attention(Tensor::flat(qkv.data(), DType::f32, Device::cpu(), qkv.size()),
                              Tensor::flat(cache.data(), DType::f32, Device::cpu(), cache.size()),
                              Tensor::flat(host_positions.data(), DType::i32, Device::cpu(), 3),
                              Tensor::flat(expected.data(), DType::f32, Device::cpu(), expected.size()),
                              {B, capacity, H, D}, Stream{});

    Buffer d_qkv(qkv_bits.size() * 2, gpu()), d_cache(cache_bits.size() * 2, gpu()), d_out(expected.size() * 2, gpu());
    Buffer d_positions(3 * sizeof(std::int32_t), gpu());
    copy_bytes(d_qkv.data(), gpu(), qkv_bits.data(), Device::cpu(), d_qkv.bytes());
    copy_bytes(d_cache.data(), gpu(), cache_bits.data(), Device::cpu(), d_cache.bytes());
    copy_bytes(d_positions.data(), gpu(), positions.data(), Device::cpu(), d_positions.bytes());
    const Stream stream(gpu());
    kernels::decode_attention(Tensor::flat(d_qkv.data(), DType::bf16, gpu(), qkv_bits.size()),
                              Tensor::flat(d_cache.data(), DType::bf16, gpu(), cache_bits.size()),
                              Tensor::flat(d_positions.data(), DType::i32, gpu(), 3),
                              Tensor::flat(d_out.data(), DType::bf16, gpu(), expected.size()), {B, capacity, H, D},
                              stream);
    stream.synchronize();
    std::vector<std::uint16_t> out(expected.size()), cache_after(cache_bits.size());
    copy_bytes(out.data(), Device::cpu(), d_out.data(), gpu(), d_out.bytes());
    copy_bytes(cache_after.data(), Device::cpu(), d_cache.data(), gpu(), d_cache.bytes());
    for (std::size_t i = 0; i < out.size(); ++i) {
      // One bf16 rounding of the output on top of fp32 sums: 2^-8 relative plus a little.
      EXPECT_NEAR(bf16_to_f32(out[i]), expected[i], 1e-3 + 4e-3 * std::fabs(expected[i])) << "D " << D << " i " << i;
    }
    for (std::size_t i = 0; i < cache.size(); ++i) {  // the new keys and values landed where the CPU put them
      ASSERT_EQ(bf16_to_f32(cache_after[i]), cache[i]) << "D " << D << " cache element " << i;
    }
  }
  // The embedding rows, exactly (one bf16 rounding of an fp32 sum on both sides).
  const std::int64_t V = 7, P = 5, C = 16;
  std::vector<std::uint16_t> word(static_cast<std::size_t>(V * C)), position(static_cast<std::size_t>(P * C));
  for (std::size_t i = 0; i < word.size(); ++i) word[i] = f32_to_bf16(std::sin(1.3f * i));
  for (std::size_t i = 0; i < position.size(); ++i) position[i] = f32_to_bf16(std::cos(0.9f * i));
  const std::vector<std::int32_t> ids{6, 0, 3, 4, 2, 1};  // tokens, then positions
  Buffer d_word(word.size() * 2, gpu()), d_position(position.size() * 2, gpu()), d_ids(ids.size() * 4, gpu());
  Buffer d_out(2 * 3 * C, gpu());
  copy_bytes(d_word.data(), gpu(), word.data(), Device::cpu(), d_word.bytes());
  copy_bytes(d_position.data(), gpu(), position.data(), Device::cpu(), d_position.bytes());
  copy_bytes(d_ids.data(), gpu(), ids.data(), Device::cpu(), d_ids.bytes());
  const Stream stream(gpu());
  auto* id_data = static_cast<std::int32_t*>(d_ids.data());
  kernels::decode_embedding(Tensor::flat(id_data, DType::i32, gpu(), 3),
                            Tensor::flat(id_data + 3, DType::i32, gpu(), 3),
                            Tensor::flat(d_word.data(), DType::bf16, gpu(), word.size()),
                            Tensor::flat(d_position.data(), DType::bf16, gpu(), position.size()),
                            Tensor::flat(d_out.data(), DType::bf16, gpu(), 3 * C), 3, C, stream);
  stream.synchronize();
  std::vector<std::uint16_t> out(static_cast<std::size_t>(3 * C));
  copy_bytes(out.data(), Device::cpu(), d_out.data(), gpu(), d_out.bytes());
  for (std::int64_t b = 0; b < 3; ++b) {
    for (std::int64_t c = 0; c < C; ++c) {
      const float sum = bf16_to_f32(word[static_cast<std::size_t>(ids[b] * C + c)]) +
                        bf16_to_f32(position[static_cast<std::size_t>(ids[3 + b] * C + c)]);
      EXPECT_EQ(out[static_cast<std::size_t>(b * C + c)], f32_to_bf16(sum));
    }
  }
}

}  // namespace
}  // namespace adamant::model
