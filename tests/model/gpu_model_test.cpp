// The GPT model on a GPU (bf16 weights, bf16 activations, fp32 statistics and
// gradients) against the same model on the CPU holding the same bf16 weights and
// computing in fp32.
//
// Tolerances. Every activation the GPU keeps is rounded to bf16 (relative error up
// to 2^-9 ~ 2e-3 per rounding); a layer rounds about ten times on the way forward
// and as often on the way back, and the errors add up roughly like a random walk
// over the two layers, which gives ~1e-2 relative error on the activations and on
// the weight gradients formed from them (fp32 accumulation adds nothing visible).
// Hence gradients per parameter within a relative L2 error of 5e-2. The loss is a
// mean over 128 tokens of values whose own errors are ~1e-2 and partly cancel:
// 2e-2 relative is a safe bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "adamant/comm/comm_stream.h"
#include "adamant/core/buffer.h"
#include "adamant/core/device.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/core/memory_stats.h"
#include "adamant/core/stream.h"
#include "adamant/model/loss_readback.h"
#include "model_test_util.h"
#include "support/gpu.h"

namespace adamant::model {
namespace {

using adamant::testing::gpu;
using testing::gpu_config;
using testing::random_batch;

constexpr double kLossTolerance = 2e-2;      // relative, see the top of the file
constexpr double kGradientTolerance = 5e-2;  // relative L2 per parameter, see the top of the file

template <typename T>
std::vector<T> download(GptModel& model, const Tensor& t) {
  model.stream().synchronize();
  std::vector<T> out(t.numel());
  copy_bytes(out.data(), Device::cpu(), t.data, t.device, t.bytes());
  return out;
}

double norm_of(const std::vector<float>& v, std::size_t begin, std::size_t end) {
  double sum = 0;
  for (std::size_t i = begin; i < end; ++i) sum += static_cast<double>(v[i]) * v[i];
  return std::sqrt(sum);
}

double distance(const std::vector<float>& a, const std::vector<float>& b, std::size_t begin, std::size_t end) {
  double sum = 0;
  for (std::size_t i = begin; i < end; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

// ||actual - expected|| / ||expected|| for every parameter. With zero_key_bias, the key
// part of each query_key_value bias is set apart: its exact gradient is zero (a constant
// added to all keys shifts every score of a query alike, and softmax ignores that), so
// CPU and GPU only hold rounding noise there, which is bounded against the scale of the
// whole bias gradient instead.
enum class KeyBias { exactly_zero, compare };
void expect_gradients_close(const ParamList& params, const std::vector<float>& actual,
                            const std::vector<float>& expected, int hidden, double tolerance, const std::string& what,
                            KeyBias key_bias = KeyBias::exactly_zero) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (const ParamSpec& p : params.params) {
    const std::size_t begin = p.offset, end = p.offset + p.numel;
    const double scale = norm_of(expected, begin, end);
    ASSERT_GT(scale, 0.0) << what << ": " << p.name << " has no gradient on the CPU";
    if (key_bias == KeyBias::exactly_zero && p.name.ends_with("query_key_value.bias")) {
      const std::size_t keys = begin + static_cast<std::size_t>(hidden), values = keys + hidden;
      const double error = std::hypot(distance(actual, expected, begin, keys), distance(actual, expected, values, end));
      const double reference = std::hypot(norm_of(expected, begin, keys), norm_of(expected, values, end));
      EXPECT_LE(error / reference, tolerance) << what << ": " << p.name << " (queries and values)";
      EXPECT_LE(norm_of(actual, keys, values) / scale, tolerance) << what << ": " << p.name << " (keys, exactly 0)";
      continue;
    }
    const double error = distance(actual, expected, begin, end) / scale;
    if (!(error <= tolerance)) {  // NaN too: a gradient the backward left unwritten
      std::size_t worst = begin;
      for (std::size_t i = begin; i < end; ++i) {
        if (std::abs(actual[i] - expected[i]) > std::abs(actual[worst] - expected[worst])) worst = i;
      }
      ADD_FAILURE() << what << ": " << p.name << " relative L2 error " << error << " > " << tolerance
                    << "; largest difference at element " << worst - begin << ": gpu " << actual[worst] << ", cpu "
                    << expected[worst];
    }
  }
}

// The GPU tests' model with the shipped configs' dropout, 0.1 and 0.1.
GptConfig gpu_config_with_dropout() {
  GptConfig config = gpu_config();
  config.hidden_dropout = 0.1f;
  config.attention_dropout = 0.1f;
  return config;
}

// The same model with its training passes recorded (model.enable_cuda_graph).
GptConfig recorded(GptConfig config) {
  config.cuda_graph = true;
  return config;
}

struct PassResult {
  std::vector<double> losses;
  std::vector<float> grads;
  std::vector<std::size_t> ready_order;
};

// As a training step: discards the gradients held (NaN in the buffer, which the first backward
// must write over), then forward_backward over the given micro-batches; the last one reports
// its finished gradients.
PassResult run_passes(GptModel& model, const std::vector<MicroBatch>& batches, float loss_scale) {
  PassResult out;
  testing::poison_and_discard_grads(model);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const bool last = i + 1 == batches.size();
    const GradReadyFn ready = [&out](std::size_t param) { out.ready_order.push_back(param); };
    out.losses.push_back(model.forward_backward(batches[i], loss_scale, last ? ready : GradReadyFn{}));
  }
  if (model.device().is_cpu()) {
    const auto grads = model.grads().span<float>();
    out.grads.assign(grads.begin(), grads.end());
  } else if (model.grads().dtype == DType::bf16) {
    for (const std::uint16_t bits : download<std::uint16_t>(model, model.grads()))
      out.grads.push_back(bf16_to_f32(bits));
  } else {
    out.grads = download<float>(model, model.grads());
  }
  return out;
}

TEST(GpuGptModel, HoldsTheCpuModelsBf16WeightsAndFp32Gradients) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config();
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 11);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 11);
  EXPECT_EQ(gpu_model.weights().dtype, DType::bf16);
  EXPECT_EQ(gpu_model.grad_dtype(), DType::f32);
  EXPECT_EQ(gpu_model.activation_dtype(), DType::bf16);
  const auto host_bits = cpu.weights().span<std::uint16_t>();
  const auto device_bits = download<std::uint16_t>(gpu_model, gpu_model.weights());
  ASSERT_EQ(device_bits.size(), host_bits.size());
  for (std::size_t i = 0; i < host_bits.size(); ++i) {
    ASSERT_EQ(device_bits[i], host_bits[i]) << "weight " << i << " differs after the upload";
  }
}

TEST(GpuGptModel, LossAndGradientsMatchTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config();
  const auto batch = random_batch(config, 2, 21);
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 7);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 7);
  const Stream compute(gpu());  // as RunSetup does: the optimizer's stream
  gpu_model.set_stream(compute);
  const float loss_scale = 4.0f;  // gradients of loss_scale * mean loss
  const PassResult expected = run_passes(cpu, {batch.view(0)}, loss_scale);
  const PassResult actual = run_passes(gpu_model, {batch.view(0)}, loss_scale);

  EXPECT_GT(expected.losses[0], std::log(50304.0) + 0.2) << "the test needs a loss away from uniform";
  EXPECT_NEAR(actual.losses[0], expected.losses[0], kLossTolerance * expected.losses[0]);
  EXPECT_EQ(actual.ready_order, expected.ready_order);
  EXPECT_EQ(actual.ready_order.size(), cpu.params().size());
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "one micro-batch");

  // Validation: the same forward without gradients.
  const double gpu_loss = gpu_model.forward_loss(batch.view(0));
  EXPECT_NEAR(gpu_loss, actual.losses[0], 1e-4 * actual.losses[0]) << "forward_loss runs the same forward";
  EXPECT_NEAR(gpu_loss, cpu.forward_loss(batch.view(0)), kLossTolerance * expected.losses[0]);

  gpu_model.zero_grads();
  for (const float g : download<float>(gpu_model, gpu_model.grads())) ASSERT_EQ(g, 0.0f) << "zero_grads";
}

// What the model's kernels keep between calls (cuBLASLt, layernorm's column sums) is made
// with the model and again by set_stream (kernels/workspace.h): steps allocate no device
// memory, not even the first.
TEST(GpuGptModel, StepsAllocateNoDeviceMemory) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config();
  const auto batch = random_batch(config, 2, 41);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 7);
  const Stream compute(gpu());
  gpu_model.set_stream(compute);
  compute.synchronize();
  reset_allocation_peak(gpu());
  const std::size_t before = allocation_stats(gpu()).in_use_bytes;
  for (int step = 0; step < 2; ++step) run_passes(gpu_model, {batch.view(0)}, 1.0f);
  gpu_model.forward_loss(batch.view(0));
  compute.synchronize();
  EXPECT_EQ(allocation_stats(gpu()).peak_bytes, before);
  EXPECT_EQ(allocation_stats(gpu()).in_use_bytes, before);
}

TEST(GpuGptModel, TanhGeluMatchesTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  GptConfig config = gpu_config();
  config.openai_gelu = true;
  const auto batch = random_batch(config, 2, 22);
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 7);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 7);
  const PassResult expected = run_passes(cpu, {batch.view(0)}, 1.0f);
  const PassResult actual = run_passes(gpu_model, {batch.view(0)}, 1.0f);
  EXPECT_NEAR(actual.losses[0], expected.losses[0], kLossTolerance * expected.losses[0]);
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "tanh GELU");
}

// model.bias_activation_fusion: the up projection's product applies the tanh GELU in its
// epilogue (and the down projection's data gradient takes it back, kernels/linear_gelu.h),
// rounding once where the separate kernels round the pre-activation first: within the
// tolerances of the CPU model, not the bits of the unfused GPU model, and repeatable.
TEST(GpuGptModel, FusedBiasGeluMatchesTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  GptConfig config = gpu_config_with_dropout();
  config.bias_activation_fusion = true;
  GptConfig unfused = config;
  unfused.bias_activation_fusion = false;
  unfused.openai_gelu = true;  // the same tanh GELU, by separate kernels
  ASSERT_TRUE(config.fuses_bias_gelu());
  const auto batch = random_batch(config, 2, 24);
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 7);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 7);
  GptModel gpu_unfused(unfused, DType::bf16, 2, gpu(), 7);
  const PassResult expected = run_passes(cpu, {batch.view(0)}, 1.0f);
  const PassResult actual = run_passes(gpu_model, {batch.view(0)}, 1.0f);
  const PassResult separate = run_passes(gpu_unfused, {batch.view(0)}, 1.0f);
  EXPECT_NEAR(actual.losses[0], expected.losses[0], kLossTolerance * expected.losses[0]);
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "fused bias-GELU");
  EXPECT_NE(actual.grads, separate.grads) << "the fused model ran the separate GELU kernels";
  const PassResult again = run_passes(gpu_model, {batch.view(0)}, 1.0f);
  EXPECT_EQ(again.losses, actual.losses);
}

// model.classifier_logits_dtype: bf16. The GPU rounds the logits to bf16 (2^-9 relative,
// inside the tolerances of the bf16 activations around them) where the CPU keeps fp32.
TEST(GpuGptModel, Bf16ClassifierLogitsMatchTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  GptConfig config = gpu_config();
  config.classifier_logits = DType::bf16;
  const auto batch = random_batch(config, 2, 23);
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 7);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 7);
  GptModel gpu_f32_logits(gpu_config(), DType::bf16, 2, gpu(), 7);
  const PassResult expected = run_passes(cpu, {batch.view(0)}, 1.0f);
  const PassResult actual = run_passes(gpu_model, {batch.view(0)}, 1.0f);
  const PassResult f32_logits = run_passes(gpu_f32_logits, {batch.view(0)}, 1.0f);
  EXPECT_NEAR(actual.losses[0], expected.losses[0], kLossTolerance * expected.losses[0]);
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "bf16 logits");
  EXPECT_NE(actual.losses[0], f32_logits.losses[0]) << "the bf16 logits model computed fp32 logits";
  EXPECT_NEAR(actual.losses[0], f32_logits.losses[0], 1e-3 * f32_logits.losses[0]);
  EXPECT_NEAR(gpu_model.forward_loss(batch.view(0)), actual.losses[0], 1e-4 * actual.losses[0]);

  // Sampling reads one fp32 row written over the (bf16) logits chunk.
  const std::span<const std::int32_t> prompt = std::span(batch.tokens).first(29);
  std::vector<float> cpu_logits(static_cast<std::size_t>(config.padded_vocab_size()));
  std::vector<float> gpu_logits(cpu_logits.size());
  cpu.next_token_logits(prompt, cpu_logits);
  gpu_model.next_token_logits(prompt, gpu_logits);
  EXPECT_LE(distance(gpu_logits, cpu_logits, 0, cpu_logits.size()) / norm_of(cpu_logits, 0, cpu_logits.size()),
            kGradientTolerance);
}

TEST(GpuGptModel, GradientsAccumulateOverMicroBatches) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config();
  const auto first = random_batch(config, 2, 31), second = random_batch(config, 1, 32);  // a short micro-batch too
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 3);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 3);
  const std::vector<MicroBatch> both = {first.view(0), second.view(2)};
  const PassResult expected = run_passes(cpu, both, 1.0f);
  const PassResult actual = run_passes(gpu_model, both, 1.0f);
  for (std::size_t i = 0; i < both.size(); ++i) {
    EXPECT_NEAR(actual.losses[i], expected.losses[i], kLossTolerance * expected.losses[i]) << "micro-batch " << i;
  }
  EXPECT_EQ(actual.ready_order, expected.ready_order);
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "two micro-batches");

  // The sum is exactly what each micro-batch contributes alone. Deterministic kernels make
  // it bitwise; 1e-3 leaves room for fp32 atomics whose order may differ run to run.
  const PassResult alone_first = run_passes(gpu_model, {first.view(0)}, 1.0f);
  const PassResult alone_second = run_passes(gpu_model, {second.view(2)}, 1.0f);
  std::vector<float> sum(alone_first.grads.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = alone_first.grads[i] + alone_second.grads[i];
  expect_gradients_close(cpu.params(), actual.grads, sum, config.hidden_size, 1e-3, "accumulated vs summed",
                         KeyBias::compare);
}

// A bf16 gradient buffer (GptConfig::grad_buffer, which model.optim.grad_sync_dtype bf16 sets):
// the linear layers' weight-gradient GEMMs and the embeddings' kernels write and add bf16, the
// other parameters are summed in the fp32 scratch and rounded as they are added. Over two
// micro-batches (the second added in bf16) the gradients stay within the tolerances above of the
// CPU model's, which keeps fp32, and close to the fp32-buffer GPU model's, yet not its bits.
TEST(GpuGptModel, Bf16GradientBufferMatchesTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  GptConfig config = gpu_config_with_dropout();
  config.grad_buffer = DType::bf16;
  const auto first = random_batch(config, 2, 41), second = random_batch(config, 2, 42);
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 5);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 5);
  GptModel gpu_f32(gpu_config_with_dropout(), DType::bf16, 2, gpu(), 5);
  EXPECT_EQ(cpu.grads().dtype, DType::f32) << "the CPU keeps fp32 gradients";
  EXPECT_EQ(gpu_model.grads().dtype, DType::bf16);
  EXPECT_EQ(gpu_model.grads().bytes(), gpu_model.buffer_numel() * 2);
  EXPECT_EQ(gpu_model.grad_dtype(), DType::f32) << "statistics stay fp32";
  const std::vector<MicroBatch> both = {first.view(0), second.view(0)};
  const PassResult expected = run_passes(cpu, both, 2.0f);
  const PassResult actual = run_passes(gpu_model, both, 2.0f);
  const PassResult f32_buffer = run_passes(gpu_f32, both, 2.0f);
  for (std::size_t i = 0; i < both.size(); ++i) {
    EXPECT_NEAR(actual.losses[i], expected.losses[i], kLossTolerance * expected.losses[i]) << "micro-batch " << i;
    EXPECT_EQ(actual.losses[i], f32_buffer.losses[i]) << "the forward does not read the gradients";
  }
  EXPECT_EQ(actual.ready_order, expected.ready_order);
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "bf16 gradient buffer, two micro-batches");
  // A few roundings to bf16 (2^-8 each at most) a value: the word embedding's takes four (the classifier's
  // and the embedding's share, each micro-batch).
  expect_gradients_close(cpu.params(), actual.grads, f32_buffer.grads, config.hidden_size, 1e-2,
                         "bf16 against fp32 gradient buffer", KeyBias::compare);
  EXPECT_NE(actual.grads, f32_buffer.grads) << "the bf16 buffer held fp32 sums";
}

// Selective recomputation (the GELU outputs recomputed in backward) runs the same kernels on
// the same values: the losses are bitwise the model's that keeps them (dropout on), and so are
// the gradients but for the order of the embedding gradient's fp32 atomics.
TEST(GpuGptModel, SelectiveRecomputationChangesNoBit) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config_with_dropout();
  GptConfig recomputing = config;
  recomputing.recompute_activation = true;
  const auto first = random_batch(config, 2, 51), second = random_batch(config, 2, 52);
  GptModel keeping_model(config, DType::bf16, 2, gpu(), 8);
  GptModel recomputing_model(recomputing, DType::bf16, 2, gpu(), 8);
  const std::vector<MicroBatch> both = {first.view(0), second.view(2)};
  const PassResult kept = run_passes(keeping_model, both, 1.0f);
  const PassResult recomputed = run_passes(recomputing_model, both, 1.0f);
  EXPECT_EQ(recomputed.losses, kept.losses);
  expect_gradients_close(keeping_model.params(), recomputed.grads, kept.grads, config.hidden_size, 1e-5,
                         "selective recomputation", KeyBias::compare);
}

// model.enable_cuda_graph: each pass runs directly, is recorded on its second run and replayed
// from the third. The replays read each micro-batch's tokens, targets and first sample index
// from memory, so the losses are the direct model's bit for bit, with dropout, and so are the
// gradients but for the order of the embedding gradient's fp32 atomics; the gradients are
// reported in the same order. A short micro-batch or another loss scale is recorded anew. A
// step's first backward (which writes the gradients) and the others (which add) are recorded
// apart, each with and without reports: four backward graphs of a (chunk, slot).
TEST(GpuGptModel, RecordedPassesChangeNoBit) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config_with_dropout();
  GptModel direct(config, DType::bf16, 2, gpu(), 9);
  GptModel recorded_model(recorded(config), DType::bf16, 2, gpu(), 9);
  const auto batch = random_batch(config, 2, 61), other = random_batch(config, 2, 62);
  struct Step {
    std::vector<MicroBatch> micro_batches;
    float loss_scale;
    int recorded_after;  // passes held as graphs after the step
  };
  const std::vector<Step> steps = {
      {{batch.view(0)}, 1.0f, 0},  // direct
      {{other.view(2)}, 1.0f, 2},  // recorded (the forward and the writing backward with reports), then launched
      {{batch.view(4), other.view(6)}, 1.0f, 2},  // the forward replayed twice; both backwards' first runs
      {{other.view(9, 1, 1)}, 1.0f, 0},           // a short micro-batch: direct again
      {{batch.view(11, 0, 1)}, 1.0f, 2},          // recorded at its size
      // Full size, new scale: the forward recorded on the second micro-batch; the two backwards
      // direct again; the writing backward with reports keeps its graph of one sample.
      {{batch.view(12), other.view(14)}, 4.0f, 2},
      {{other.view(16)}, 4.0f, 1},                  // that one at the new size and scale: direct
      {{batch.view(18)}, 4.0f, 2},                  // recorded
      {{other.view(20), batch.view(22)}, 4.0f, 4},  // the writing and the adding backward recorded
      {{batch.view(24), other.view(26)}, 4.0f, 4},  // everything replayed
  };
  std::vector<float> previous;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const Step& step = steps[i];
    const PassResult expected = run_passes(direct, step.micro_batches, step.loss_scale);
    const PassResult actual = run_passes(recorded_model, step.micro_batches, step.loss_scale);
    EXPECT_EQ(actual.losses, expected.losses);
    EXPECT_EQ(actual.ready_order, expected.ready_order);
    expect_gradients_close(direct.params(), actual.grads, expected.grads, config.hidden_size, 1e-5, "recorded passes",
                           KeyBias::compare);
    EXPECT_EQ(recorded_model.recorded_passes(), step.recorded_after);
    EXPECT_NE(actual.grads, previous) << "a replay left the last step's gradients";
    previous = actual.grads;
  }
  // The backward that reports its gradients is recorded in stretches between the reports.
  EXPECT_GT(recorded_model.recorded_graphs(), recorded_model.recorded_passes() + 10);
}

// What the trainer's gradient sync does when a bucket is complete (comm::CommStream::order_after):
// another stream waits for an event recorded on the model's stream at the report. Each report
// copies the reported gradient on that stream, and the first also the position embedding's,
// which the backward finishes last: the copies must hold every gradient final and the position
// embedding's still the last step's (each step starts as the trainer's, with discard_grads, so
// the backward zeroes that table only just before adding its rows), in a replay as in a direct run.
TEST(GpuGptModel, RecordedBackwardReportsEachGradientInStreamOrder) {
  ADAMANT_REQUIRE_GPU();
  GptConfig config = gpu_config_with_dropout();
  config.cuda_graph = true;
  GptModel model(config, DType::bf16, 2, gpu(), 9);
  const ParamList& params = model.params();
  // Finished by the embedding backward, last (the word embedding's gets the classifier's share first).
  const ParamSpec& position = params[params.index_of("embedding.position_embeddings.weight")];
  const Stream side(gpu());
  Event reported(gpu());
  const std::size_t bytes = model.grads().bytes();
  Buffer copies(bytes, gpu()), position_at_first(position.numel * sizeof(float), gpu());
  const auto batch = random_batch(config, 2, 71);
  std::vector<float> last_position(position.numel, 0.0f);  // a new model's gradients are zero
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    model.discard_grads();
    bool first = true;
    auto* grads = static_cast<const float*>(model.grads().data);
    model.forward_backward(batch.view(2 * step), 1.0f, [&](std::size_t p) {
      reported.record(model.stream());
      reported.wait_on(side);
      const ParamSpec& spec = params[p];
      comm::copy_bytes_on_stream(static_cast<float*>(copies.data()) + spec.offset, grads + spec.offset,
                                 spec.numel * sizeof(float), side);
      if (first) {
        comm::copy_bytes_on_stream(position_at_first.data(), grads + position.offset, position.numel * sizeof(float),
                                   side);
        first = false;
      }
    });
    side.synchronize();
    const std::vector<float> final_grads = download<float>(model, model.grads());
    std::vector<float> copied(final_grads.size()), position_copy(position.numel);
    copy_bytes(copied.data(), Device::cpu(), copies.data(), gpu(), bytes);
    copy_bytes(position_copy.data(), Device::cpu(), position_at_first.data(), gpu(), position.numel * sizeof(float));
    for (const ParamSpec& spec : params.params) {
      ASSERT_TRUE(std::equal(final_grads.begin() + static_cast<std::ptrdiff_t>(spec.offset),
                             final_grads.begin() + static_cast<std::ptrdiff_t>(spec.offset + spec.numel),
                             copied.begin() + static_cast<std::ptrdiff_t>(spec.offset)))
          << spec.name << " was copied before its gradient was final";
    }
    EXPECT_EQ(position_copy, last_position)
        << "the first report came after the position embedding's gradient: not during the backward";
    last_position.assign(final_grads.begin() + static_cast<std::ptrdiff_t>(position.offset),
                         final_grads.begin() + static_cast<std::ptrdiff_t>(position.offset + position.numel));
    ASSERT_NE(position_copy, last_position) << "the step did not change the position embedding's gradient";
  }
  EXPECT_GE(model.recorded_passes(), 2);  // steps 2 and 3 replayed both passes
}

// The first forward of a step under overlap_param_sync waits for each weight right before the first
// kernel that reads it, and the trainer's stream waits there for the weight's Adam and all-gather.
// Here each wait copies weights on the model's stream into weights that were NaN until then, as the
// all-gather does: the losses must be the bits of a model whose weights were in place from the
// start, and the gradients too (but for the order of the embedding gradient's fp32 atomics), in the
// direct run, the recording and the replays alike. Without a pending test every weight is waited
// for, in order of first use; with one (groups of 4 consecutive parameters standing for buckets, a
// wait bringing its whole group) only each group's first read, the others' weights being in place,
// and the recorded forward has one graph per wait instead of one per parameter.
TEST(GpuGptModel, RecordedForwardWaitsForEachWeightBeforeItsFirstUse) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config_with_dropout();
  GptModel in_place(config, DType::bf16, 2, gpu(), 9);
  const auto batch = random_batch(config, 2, 81);
  std::vector<int> graphs;  // recorded graphs with groups of 1 and of 4
  for (const std::size_t group : {std::size_t{1}, std::size_t{4}}) {
    SCOPED_TRACE("groups of " + std::to_string(group));
    GptModel arriving(recorded(config), DType::bf16, 2, gpu(), 9);  // the same seed: the same weights
    const ParamList& params = arriving.params();
    const Tensor live = arriving.weights();
    Buffer saved(live.bytes(), gpu()), not_a_number(live.bytes(), gpu());
    comm::copy_bytes_on_stream(saved.data(), live.data, live.bytes(), arriving.stream());
    const std::vector<std::uint16_t> nan_bits(live.numel(), 0x7fc0);  // bf16 NaN
    copy_bytes(not_a_number.data(), gpu(), nan_bits.data(), Device::cpu(), live.bytes());
    const std::size_t groups = (params.size() + group - 1) / group;
    auto group_end = [&](std::size_t g) { return std::min(params.size(), (g + 1) * group); };
    std::vector<std::size_t> expected_waits;  // each group's last parameter, the forward's first read of it
    for (std::size_t g = groups; g-- > 0;) expected_waits.push_back(group_end(g) - 1);
    for (int step = 0; step < 4; ++step) {  // direct, recorded, replayed twice
      SCOPED_TRACE("step " + std::to_string(step));
      const MicroBatch micro_batch = batch.view(2 * static_cast<std::uint64_t>(step));
      const PassResult expected = run_passes(in_place, {micro_batch}, 1.0f);
      testing::poison_and_discard_grads(arriving);
      comm::copy_bytes_on_stream(live.data, not_a_number.data(), live.bytes(), arriving.stream());
      std::vector<std::size_t> waits;
      std::vector<std::uint8_t> arrived(groups, 0);
      WeightNeeds needs{[&](std::size_t p) {
                          waits.push_back(p);
                          const std::size_t g = p / group;
                          const std::size_t begin = params[g * group].offset * sizeof(std::uint16_t);
                          const std::size_t end = (params[group_end(g) - 1].offset + params[group_end(g) - 1].numel) *
                                                  sizeof(std::uint16_t);
                          comm::copy_bytes_on_stream(static_cast<char*>(live.data) + begin,
                                                     static_cast<const char*>(saved.data()) + begin, end - begin,
                                                     arriving.stream());
                          arrived[g] = 1;
                        },
                        {}};
      if (group > 1) needs.pending = [&](std::size_t p) { return arrived[p / group] == 0; };
      arriving.forward_pass(0, 0, micro_batch, true, needs);
      arriving.backward_pass(0, 0, micro_batch, 1.0f);
      EXPECT_EQ(arriving.take_loss_sum(), expected.losses.at(0));
      expect_gradients_close(params, download<float>(arriving, arriving.grads()), expected.grads, config.hidden_size,
                             1e-5, "weights arriving as waited for", KeyBias::compare);
      EXPECT_EQ(waits, expected_waits);
    }
    EXPECT_GE(arriving.recorded_passes(), 2);  // the forward with waits and the backward
    // The forward in stretches between waits (waits with no kernel between them end one graph), and
    // the backward in one graph.
    graphs.push_back(arriving.recorded_graphs());
    EXPECT_LE(graphs.back(), static_cast<int>(groups) + 1);
  }
  EXPECT_LT(graphs.at(1), graphs.at(0));  // fewer waits, fewer graphs
}

TEST(GpuGptModel, DropoutMasksMatchTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config_with_dropout();
  const auto batch = random_batch(config, 2, 41);
  const std::vector<MicroBatch> batches = {batch.view(6)};  // masks of global samples 6 and 7
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 5);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 5);
  const PassResult expected = run_passes(cpu, batches, 1.0f);
  const PassResult actual = run_passes(gpu_model, batches, 1.0f);
  EXPECT_NEAR(actual.losses[0], expected.losses[0], kLossTolerance * expected.losses[0]);
  expect_gradients_close(cpu.params(), actual.grads, expected.grads, config.hidden_size, kGradientTolerance,
                         "dropout 0.1");

  // Other masks (other sample indices) change the gradients far beyond the tolerance, so
  // agreement above means the GPU drew the CPU's masks.
  const PassResult other_masks = run_passes(cpu, {batch.view(100)}, 1.0f);
  const std::size_t n = expected.grads.size();
  EXPECT_GT(distance(other_masks.grads, expected.grads, 0, n) / norm_of(expected.grads, 0, n), 2 * kGradientTolerance);
}

TEST(GpuGptModel, NextTokenLogitsMatchTheCpuModel) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config();
  GptModel cpu(config, DType::bf16, 2, Device::cpu(), 13);
  GptModel gpu_model(config, DType::bf16, 2, gpu(), 13);
  const auto batch = random_batch(config, 1, 51);
  const std::span<const std::int32_t> prompt = std::span(batch.tokens).first(37);  // a shorter sequence
  std::vector<float> expected(static_cast<std::size_t>(config.padded_vocab_size()));
  std::vector<float> actual(expected.size());
  cpu.next_token_logits(prompt, expected);
  gpu_model.next_token_logits(prompt, actual);
  // Logits are dot products of bf16 activations with bf16 weights: the gradients' bound applies.
  EXPECT_LE(distance(actual, expected, 0, expected.size()) / norm_of(expected, 0, expected.size()), kGradientTolerance);
}

// The losses land in page-locked host memory in stream order: what the stream writes into the
// device losses after a pass is queued does not reach that pass's copy, and passes folded early
// for lack of room (room for one here) add up as if all were taken at the end.
TEST(GpuLossReadback, CopiesEachPassInStreamOrder) {
  ADAMANT_REQUIRE_GPU();
  const Stream stream(gpu());
  const std::size_t n = std::size_t{1} << 16;
  Buffer device_losses(n * sizeof(float), gpu());
  const Tensor losses = Tensor::flat(device_losses.data(), DType::f32, gpu(), n);
  LossReadback reads(n, DType::f32, gpu(), 1);
  std::vector<float> host(n);
  double expected = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (std::size_t i = 0; i < n; ++i) host[i] = 0.25f * static_cast<float>(pass + 1) + static_cast<float>(i % 7);
    comm::copy_bytes_on_stream(device_losses.data(), host.data(), n * sizeof(float), stream);
    reads.queue(losses, stream);
    double sum = 0;
    for (const float v : host) sum += v;
    expected += sum / static_cast<double>(n);
  }
  std::fill(host.begin(), host.end(), 1e30f);
  comm::copy_bytes_on_stream(device_losses.data(), host.data(), n * sizeof(float), stream);
  EXPECT_EQ(reads.untaken(), 3);
  EXPECT_EQ(reads.take_sum_of_means(), expected);
  stream.synchronize();
}

TEST(GpuGptModel, RejectsWeightsOtherThanBf16AndAStreamOfAnotherDevice) {
  ADAMANT_REQUIRE_GPU();
  const GptConfig config = gpu_config();
  EXPECT_THROW(GptModel(config, DType::f32, 2, gpu(), 1), Error);
  GptModel gpu_model(config, DType::bf16, 1, gpu(), 1);
  const Stream host_stream;
  EXPECT_THROW(gpu_model.set_stream(host_stream), Error);
}

}  // namespace
}  // namespace adamant::model
