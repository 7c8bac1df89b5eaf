#pragma once
// Tiny configurations and synthetic batches for the model tests.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "adamant/model/gpt_model.h"

namespace adamant::model::testing {

// 2 layers of `hidden` width (ffn 4 x hidden), `heads` heads, `seq_length` positions, no dropout.
inline GptConfig two_layer_config(int hidden, int heads, int seq_length, int vocab_size) {
  GptConfig config;
  config.hidden_dropout = config.attention_dropout = 0.0f;  // GptConfig defaults to NeMo's 0.1
  config.num_layers = 2;
  config.hidden_size = hidden;
  config.num_attention_heads = heads;
  config.ffn_hidden_size = 4 * hidden;
  config.seq_length = seq_length;
  config.vocab_size = vocab_size;
  return config;
}

// 2 layers, hidden 16, 2 heads, seq 8, vocab 60 -> padded to 64 (multiple of 8).
inline GptConfig tiny_config() {
  GptConfig config = two_layer_config(16, 2, 8, 60);
  config.make_vocab_size_divisible_by = 8;
  return config;
}

// The GPU tests' model: hidden 128, 2 heads of 64 (the flash attention kernel's smallest head),
// seq 64, the GPT-2 vocabulary padded to 50304. init std 0.1 instead of 0.02 puts the loss well
// away from ln(vocab), so a wrong forward cannot pass as "near uniform".
inline GptConfig gpu_config() {
  GptConfig config = two_layer_config(128, 2, 64, 50257);
  config.init_method_std = 0.1f;
  return config;
}

struct SyntheticBatch {
  std::vector<std::int32_t> tokens, targets;
  int batch_size = 0;

  MicroBatch view(std::uint64_t first_sample_index, int first = 0, int count = -1) const {
    const int samples = count < 0 ? batch_size - first : count;
    const std::size_t seq = tokens.size() / static_cast<std::size_t>(batch_size);
    const std::size_t begin = static_cast<std::size_t>(first) * seq, size = static_cast<std::size_t>(samples) * seq;
    return {std::span(tokens).subspan(begin, size), std::span(targets).subspan(begin, size), samples,
            first_sample_index};
  }
};

inline SyntheticBatch random_batch(const GptConfig& config, int batch_size, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> id(0, config.vocab_size - 1);
  SyntheticBatch batch;
  batch.batch_size = batch_size;
  const std::size_t n = static_cast<std::size_t>(batch_size) * config.seq_length;
  for (std::size_t i = 0; i < n; ++i) batch.tokens.push_back(id(rng));
  for (std::size_t i = 0; i < n; ++i) batch.targets.push_back(id(rng));
  return batch;
}

// Two micro-batches of `batch` (samples 0-1 and 2-3) through the pipeline stages of one model (stage s in
// stages[s], built with 2 x chunks passes in flight), chained in one process: every forward of both
// micro-batches first, then every backward, each (micro-batch, chunk) pass in an activation slot of its own.
// hand_over(from, to) copies a pass's output into the next virtual stage's input, and an input gradient
// into the previous one's output gradient, as the schedule's sends would. Returns the losses.
template <typename HandOver>
std::array<double, 2> run_chained_stages(const std::vector<std::unique_ptr<GptModel>>& stages,
                                         const SyntheticBatch& batch, float loss_scale, HandOver hand_over) {
  const int p = static_cast<int>(stages.size());
  const int chunks = stages.front()->config().virtual_pipeline_size, virtual_stages = p * chunks;
  auto slot = [&](int m, int v) { return m * chunks + v / p; };
  auto stage = [&](int v) -> GptModel& { return *stages[static_cast<std::size_t>(v % p)]; };
  for (int m = 0; m < 2; ++m) {
    const MicroBatch mb = batch.view(2 * m, 2 * m, 2);
    for (int v = 0; v < virtual_stages; ++v) {
      if (v > 0) hand_over(stage(v - 1).pass_output(slot(m, v - 1), 2), stage(v).pass_input(slot(m, v), 2));
      stage(v).forward_pass(v / p, slot(m, v), mb, true);
    }
  }
  std::array<double, 2> losses{};
  for (int m = 0; m < 2; ++m) {
    const MicroBatch mb = batch.view(2 * m, 2 * m, 2);
    for (int v = virtual_stages - 1; v >= 0; --v) {
      if (v + 1 < virtual_stages) hand_over(stage(v + 1).input_grad(slot(m, v + 1), 2), stage(v).output_grad(2));
      stage(v).backward_pass(v / p, slot(m, v), mb, loss_scale);
      if (v + 1 == virtual_stages) losses[static_cast<std::size_t>(m)] = stage(v).take_loss_sum();
    }
  }
  return losses;
}

// Each parameter's gradient over pipeline stages, by name: a tied copy's adds to its owner's.
// Call once per stage with its parameter list and its (host) gradients.
template <typename T>
void add_stage_grads(std::map<std::string, std::vector<double>>& by_name, const ParamList& params,
                     std::span<const T> grads) {
  for (const ParamSpec& spec : params.params) {
    auto& sum = by_name[spec.name];
    sum.resize(spec.numel, 0.0);
    for (std::size_t i = 0; i < spec.numel; ++i) sum[i] += grads[spec.offset + i];
  }
}

// The largest |got[i] - expected[i]|, and NaN where any difference is NaN (a gradient left
// unwritten, as poison_and_discard_grads leaves it), so that every `<=` tolerance check fails.
inline double max_abs_difference(std::span<const double> got, std::span<const double> expected) {
  double largest = 0;
  for (std::size_t i = 0; i < std::min(got.size(), expected.size()); ++i) {
    const double difference = std::abs(got[i] - expected[i]);
    if (!(difference <= largest)) largest = difference;
  }
  return got.size() == expected.size() ? largest : std::nan("");
}

// Fills every parameter's gradient in model.grads() with NaN (the padding stays zero), on the
// model's device, and discards them (GptModel::discard_grads), as a training step starts: each
// chunk's next backward must write over all of them, and any place it misses stays NaN.
inline void poison_and_discard_grads(GptModel& model) {
  const Tensor grads = model.grads();
  model.stream().synchronize();
  std::vector<std::byte> host(grads.bytes());
  copy_bytes(host.data(), Device::cpu(), grads.data, grads.device, host.size());
  const Tensor on_host = Tensor::flat(host.data(), grads.dtype, Device::cpu(), grads.numel());
  for (const ParamSpec& spec : model.params().params) {
    if (grads.dtype == DType::f64) {
      std::ranges::fill(on_host.span<double>().subspan(spec.offset, spec.numel), std::nan(""));
    } else if (grads.dtype == DType::bf16) {  // a bf16 gradient buffer (GptConfig::grad_buffer)
      std::ranges::fill(on_host.span<std::uint16_t>().subspan(spec.offset, spec.numel), std::uint16_t{0x7fc0});
    } else {
      std::ranges::fill(on_host.span<float>().subspan(spec.offset, spec.numel), std::nanf(""));
    }
  }
  copy_bytes(grads.data, grads.device, host.data(), Device::cpu(), host.size());
  model.discard_grads();
}

template <typename T>
std::vector<T> copy_of(const Tensor& t) {
  const auto values = t.span<T>();
  return {values.begin(), values.end()};
}

}  // namespace adamant::model::testing
