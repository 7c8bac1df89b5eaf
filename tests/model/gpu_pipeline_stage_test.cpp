// Pipeline stages on one GPU: the stages of a split model (bf16 weights and activations), run
// pass by pass with two micro-batches in flight and the activations and their gradients copied
// from stage to stage as the schedule's sends would, against the whole model on the same GPU.
// Both run the same kernels on the same bf16 values, so losses and gradients agree to rounding
// of the sums (the tied word embedding's two gradients are added in another order).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/stream.h"
#include "model_test_util.h"
#include "support/gpu.h"

namespace adamant::model {
namespace {

using adamant::testing::gpu;

std::vector<float> download(GptModel& model) {
  model.stream().synchronize();
  const Tensor grads = model.grads();
  std::vector<float> out(grads.numel());
  copy_bytes(out.data(), Device::cpu(), grads.data, grads.device, grads.bytes());
  return out;
}

void copy_on_gpu(const Stream& stream, const Tensor& from, const Tensor& to) {
  ASSERT_EQ(from.bytes(), to.bytes());
  stream.synchronize();  // the producing pass is done
  copy_bytes(to.data, to.device, from.data, from.device, from.bytes());
}

// Four layers over two stages of two chunks each, dropout on.
GptConfig interleaved_config() {
  GptConfig config = testing::gpu_config();
  config.num_layers = 4;
  config.hidden_dropout = config.attention_dropout = 0.1f;
  config.pipeline_parallel_size = 2;
  config.virtual_pipeline_size = 2;
  return config;
}

// Both stages of `config` on `stream`, each holding four passes in flight (two micro-batches x two chunks).
std::vector<std::unique_ptr<GptModel>> make_stages(const GptConfig& config, std::uint64_t seed, const Stream& stream) {
  std::vector<std::unique_ptr<GptModel>> stages;
  for (int s = 0; s < 2; ++s) {
    stages.push_back(std::make_unique<GptModel>(config, DType::bf16, 2, gpu(), seed, 0, nullptr, s, 4));
    stages.back()->set_stream(stream);
  }
  return stages;
}

TEST(GpuPipelineStage, InterleavedStagesComputeTheWholeModel) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = interleaved_config();
  const auto batch = testing::random_batch(config, 4, 5);
  constexpr std::uint64_t kSeed = 13;
  const Stream stream(gpu());

  GptModel whole(config.whole_model(), DType::bf16, 2, gpu(), kSeed);
  whole.set_stream(stream);
  whole.zero_grads();
  double whole_loss[2];
  for (int m = 0; m < 2; ++m) whole_loss[m] = whole.forward_backward(batch.view(2 * m, 2 * m, 2), 1.0f);
  const auto whole_grads = download(whole);

  const auto stages = make_stages(config, kSeed, stream);
  for (const auto& stage : stages) testing::poison_and_discard_grads(*stage);  // as a step starts
  const auto losses = testing::run_chained_stages(
      stages, batch, 1.0f, [&](const Tensor& from, const Tensor& to) { copy_on_gpu(stream, from, to); });
  for (int m = 0; m < 2; ++m) {
    EXPECT_NEAR(losses[static_cast<std::size_t>(m)], whole_loss[m], 1e-5 * whole_loss[m]) << "micro-batch " << m;
  }

  std::map<std::string, std::vector<double>> summed;  // the tied copies' gradients add up
  for (const auto& stage : stages) {
    const auto grads = download(*stage);
    testing::add_stage_grads(summed, stage->params(), std::span<const float>(grads));
  }
  ASSERT_EQ(summed.size(), whole.params().size());
  for (const ParamSpec& spec : whole.params().params) {
    const auto& got = summed[spec.name];
    double error = 0, norm = 0;
    for (std::size_t i = 0; i < spec.numel; ++i) {
      const double expected = whole_grads[spec.offset + i];
      error += (got[i] - expected) * (got[i] - expected);
      norm += expected * expected;
    }
    ASSERT_GT(norm, 0.0) << spec.name;
    // Same kernels on the same values: only the order of a few fp32 sums differs (atomics in the
    // attention backward, the tied embedding's two halves).
    EXPECT_LE(std::sqrt(error / norm), 1e-4) << spec.name;
  }
}

// model.enable_cuda_graph on interleaved stages: each (chunk, slot) pass is recorded on its
// second run and replayed on the third, with the activations and gradients handed over between
// passes; the losses are the direct stages' bit for bit on every run.
TEST(GpuPipelineStage, RecordedPassesOfInterleavedStagesChangeNoBit) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = interleaved_config();
  GptConfig recording = config;
  recording.cuda_graph = true;
  const auto batch = testing::random_batch(config, 4, 7);
  const Stream stream(gpu());
  const auto direct = make_stages(config, 17, stream), recorded = make_stages(recording, 17, stream);
  const auto hand_over = [&](const Tensor& from, const Tensor& to) { copy_on_gpu(stream, from, to); };
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    // As a step starts: each (chunk, slot) pass then writes (the first micro-batch) or adds alike
    // on every run, so the same graphs serve.
    for (const auto& stage : direct) testing::poison_and_discard_grads(*stage);
    for (const auto& stage : recorded) testing::poison_and_discard_grads(*stage);
    const auto expected = testing::run_chained_stages(direct, batch, 1.0f, hand_over);
    const auto actual = testing::run_chained_stages(recorded, batch, 1.0f, hand_over);
    EXPECT_EQ(actual, expected);
    // Two chunks in four slots (a slot per micro-batch and chunk), forward and backward.
    for (const auto& stage : recorded) EXPECT_EQ(stage->recorded_passes(), run == 0 ? 0 : 8);
  }
}

}  // namespace
}  // namespace adamant::model
