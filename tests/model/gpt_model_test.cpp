#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "adamant/core/half.h"
#include "adamant/model/model_memory.h"
#include "adamant/model/pipeline_stage.h"
#include "model_test_util.h"

namespace adamant::model {
namespace {

using testing::copy_of;
using testing::random_batch;
using testing::tiny_config;

TEST(GptModel, LossAtInitIsLogOfPaddedVocabulary) {
  const GptConfig config = testing::two_layer_config(64, 4, 32, 50257);
  GptModel model(config, DType::f32, 2, Device::cpu(), 1234);
  ASSERT_EQ(config.padded_vocab_size(), 50304);
  const auto batch = random_batch(config, 2, 1);
  const double loss = model.forward_backward(batch.view(0), 1.0f);
  EXPECT_NEAR(loss, std::log(50304.0), 0.02 * std::log(50304.0));
  EXPECT_EQ(model.forward_loss(batch.view(0)), loss);  // no dropout: the same forward
}

TEST(GptModel, HalfPrecisionWeightsComputeInFp32) {
  GptConfig config = tiny_config();
  config.init_method_std = 0.3f;  // a loss far from ln(vocab), so rounding shows
  const auto batch = random_batch(config, 2, 2);
  GptModel reference(config, DType::f32, 2, Device::cpu(), 9);
  reference.zero_grads();
  const double loss32 = reference.forward_backward(batch.view(0), 1.0f);
  const auto grads32 = copy_of<float>(reference.grads());
  for (const DType dtype : {DType::bf16, DType::f16}) {
    GptModel half(config, dtype, 2, Device::cpu(), 9);
    half.zero_grads();
    const double loss16 = half.forward_backward(batch.view(0), 1.0f);
    EXPECT_NEAR(loss16, loss32, 0.01 * loss32) << dtype_name(dtype);
    const auto grads16 = copy_of<float>(half.grads());
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < grads16.size(); ++i) {
      diff += (grads16[i] - grads32[i]) * (grads16[i] - grads32[i]);
      norm += grads32[i] * grads32[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 0.05) << dtype_name(dtype);
    // Exactly an fp32 model holding the rounded weights: the working copy is fp32.
    GptModel widened(config, DType::f32, 2, Device::cpu(), 0);
    const auto bits = half.weights().span<std::uint16_t>();
    auto wide = widened.weights().span<float>();
    for (std::size_t i = 0; i < bits.size(); ++i)
      wide[i] = dtype == DType::bf16 ? bf16_to_f32(bits[i]) : f16_to_f32(bits[i]);
    widened.zero_grads();
    EXPECT_EQ(widened.forward_backward(batch.view(0), 1.0f), loss16);
    EXPECT_EQ(copy_of<float>(widened.grads()), grads16);
  }
}

TEST(GptModel, GradientsAccumulateOverMicroBatchesBitwiseButTheEmbeddings) {
  const GptConfig config = tiny_config();
  const auto first = random_batch(config, 2, 3), second = random_batch(config, 1, 4);
  GptModel model(config, DType::f32, 2, Device::cpu(), 5);
  model.zero_grads();
  model.forward_backward(first.view(0), 2.0f);
  const auto g1 = copy_of<float>(model.grads());
  model.zero_grads();
  model.forward_backward(second.view(2), 2.0f);
  const auto g2 = copy_of<float>(model.grads());
  model.zero_grads();
  model.forward_backward(first.view(0), 2.0f);
  model.forward_backward(second.view(2), 2.0f);
  const auto together = copy_of<float>(model.grads());
  // Each GEMM adds a micro-batch's whole share at once: bitwise the sum. The embeddings get two
  // shares a micro-batch (the classifier's and the lookup's, added to the gradient buffer one
  // after the other, model_memory.h), so their sum is only as exact as fp32 rounding.
  for (const ParamSpec& spec : model.params().params) {
    const bool embedding = spec.name.find("embeddings") != std::string::npos;
    double magnitude = 0;
    for (std::size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      magnitude = std::max(magnitude, std::abs(static_cast<double>(g1[i])) + std::abs(static_cast<double>(g2[i])));
    }
    for (std::size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      if (embedding) {
        ASSERT_NEAR(together[i], g1[i] + g2[i], 1e-5 * magnitude) << spec.name << " " << i;
      } else {
        ASSERT_EQ(together[i], g1[i] + g2[i]) << spec.name << " " << i;
      }
    }
  }
  // Run to run, bitwise.
  GptModel again(config, DType::f32, 2, Device::cpu(), 5);
  again.zero_grads();
  again.forward_backward(first.view(0), 2.0f);
  EXPECT_EQ(copy_of<float>(again.grads()), g1);
}

// A step starts with discard_grads: each chunk's first backward then writes its gradients
// over whatever the buffer holds (the GEMMs with beta 0, the biases' and layernorms' kernels
// straight into the buffer where it is aligned as their scratch, else a copy from it, the
// embedding tables zeroed before their rows are added) and the next backward adds. Against
// the same model zeroing the buffer and adding both micro-batches, with NaN in the buffer
// beforehand: the same bits, padding included, at a width whose parameters all lie 256 bytes
// apart (every gradient written in place, with selective recomputation) and at one where most
// do not (copied).
TEST(GptModel, ADiscardedStepWritesTheGradientsThatZeroingAndAddingMakes) {
  for (const int hidden : {16, 64}) {
    for (const DType dtype : {DType::f32, DType::f64}) {
      SCOPED_TRACE("hidden " + std::to_string(hidden) + " " + std::string(dtype_name(dtype)));
      GptConfig config = tiny_config();
      config.hidden_size = hidden;
      config.ffn_hidden_size = 4 * hidden;
      config.hidden_dropout = 0.1f;
      config.attention_dropout = 0.1f;
      config.recompute_activation = hidden == 64;  // selective recomputation's order of the MLP's gradients
      const auto first = random_batch(config, 2, 41), second = random_batch(config, 1, 42);
      GptModel adding(config, dtype, 2, Device::cpu(), 43), writing(config, dtype, 2, Device::cpu(), 43);
      for (GptModel* model : {&adding, &writing}) model->forward_backward(first.view(0), 1.0f);  // a step before
      adding.zero_grads();  // its next backwards add to zeros
      testing::poison_and_discard_grads(writing);
      for (const auto& [batch, at] : {std::pair{&first, 3}, std::pair{&second, 5}}) {
        EXPECT_EQ(writing.forward_backward(batch->view(at), 2.0f), adding.forward_backward(batch->view(at), 2.0f));
        if (dtype == DType::f64) {
          EXPECT_EQ(copy_of<double>(writing.grads()), copy_of<double>(adding.grads())) << "after sample " << at;
        } else {
          EXPECT_EQ(copy_of<float>(writing.grads()), copy_of<float>(adding.grads())) << "after sample " << at;
        }
      }
    }
  }
}

TEST(GptModel, MicroBatchGradientDoesNotDependOnModelCapacity) {
  // Vocabulary 50304 and 256 tokens: the classifier takes the sample in two chunks.
  GptConfig config = tiny_config();
  config.seq_length = 256;
  config.vocab_size = 50257;
  config.make_vocab_size_divisible_by = 128;
  const auto sample = random_batch(config, 1, 15);
  std::vector<float> reference;
  for (const int capacity : {1, 3}) {
    GptModel model(config, DType::f32, capacity, Device::cpu(), 16);
    model.zero_grads();
    model.forward_backward(sample.view(0), 1.0f);
    if (reference.empty()) {
      reference = copy_of<float>(model.grads());
    } else {
      EXPECT_EQ(copy_of<float>(model.grads()), reference);
    }
  }
}

// model.activations_checkpoint_granularity: selective recomputes the GELU outputs in
// backward: the same arithmetic, so losses and gradients are bitwise those of the model that
// keeps them, with dropout on and over two micro-batches; the layout keeps one GELU buffer
// instead of one per layer.
TEST(GptModel, SelectiveRecomputationChangesNoBitAndKeepsOneGeluBuffer) {
  GptConfig config = tiny_config();
  config.num_layers = 3;
  config.hidden_dropout = 0.2f;
  config.attention_dropout = 0.2f;
  GptConfig recomputing = config;
  recomputing.recompute_activation = true;
  const auto first = random_batch(config, 2, 41), second = random_batch(config, 2, 42);
  GptModel keeping_model(config, DType::f32, 2, Device::cpu(), 6);
  GptModel recomputing_model(recomputing, DType::f32, 2, Device::cpu(), 6);
  for (GptModel* model : {&keeping_model, &recomputing_model}) model->zero_grads();
  for (const auto* batch : {&first, &second}) {
    EXPECT_EQ(recomputing_model.forward_backward(batch->view(0), 4.0f),
              keeping_model.forward_backward(batch->view(0), 4.0f));
  }
  EXPECT_EQ(copy_of<float>(recomputing_model.grads()), copy_of<float>(keeping_model.grads()));

  ActivationDtypes dtypes;
  dtypes.activation = DType::bf16;
  const ActivationLayout kept = ActivationLayout::plan(config, 2, dtypes, config.num_layers);
  const ActivationLayout shared = ActivationLayout::plan(recomputing, 2, dtypes, config.num_layers);
  const std::size_t gelu_bytes = 2 * static_cast<std::size_t>(config.seq_length * config.ffn_hidden_size) * 2;
  const std::size_t aligned = (gelu_bytes + ActivationLayout::kRegionAlignment - 1) /
                              ActivationLayout::kRegionAlignment * ActivationLayout::kRegionAlignment;
  EXPECT_EQ(kept.total_bytes() - shared.total_bytes(), (config.num_layers - 1) * aligned);
  // The shared output is scratch: a pipeline stage holding several micro-batches keeps none of them.
  EXPECT_EQ(kept.saved_bytes - shared.saved_bytes, config.num_layers * aligned);
  for (const LayerActivations& layer : shared.layers) EXPECT_EQ(layer.fc_gelu.offset, shared.layers[0].fc_gelu.offset);
}

// model.bias_activation_fusion: on the CPU the up projection and its GELU (kernels/linear_gelu.h)
// run the product and the GELU kernels one after the other, and the bias gradient of the up
// projection is summed by bias_grad instead of by the GELU backward: the same arithmetic, so
// losses and gradients are bitwise those of the unfused tanh model (openai_gelu), over two
// micro-batches with dropout. With selective recomputation the fusion is off.
TEST(GptModel, FusedBiasGeluOnTheCpuIsTheUnfusedTanhModel) {
  GptConfig fused = tiny_config();
  fused.num_layers = 2;
  fused.hidden_dropout = 0.2f;
  fused.attention_dropout = 0.2f;
  fused.bias_activation_fusion = true;
  GptConfig unfused = fused;
  unfused.bias_activation_fusion = false;
  unfused.openai_gelu = true;
  ASSERT_TRUE(fused.fuses_bias_gelu());
  ASSERT_EQ(fused.gelu(), unfused.gelu());
  const auto first = random_batch(fused, 2, 43), second = random_batch(fused, 2, 44);
  GptModel fused_model(fused, DType::f32, 2, Device::cpu(), 6);
  GptModel unfused_model(unfused, DType::f32, 2, Device::cpu(), 6);
  for (GptModel* model : {&fused_model, &unfused_model}) model->zero_grads();
  for (const auto* batch : {&first, &second}) {
    EXPECT_EQ(fused_model.forward_backward(batch->view(0), 4.0f), unfused_model.forward_backward(batch->view(0), 4.0f));
  }
  EXPECT_EQ(copy_of<float>(fused_model.grads()), copy_of<float>(unfused_model.grads()));

  GptConfig selective = fused;
  selective.recompute_activation = true;
  EXPECT_FALSE(selective.fuses_bias_gelu());
}

// The classifier's logits live over the blocks' scratch (d_branch, branch, d_attention,
// d_qkv, d_fc), which no pass uses while the classifier runs, and the embedding backward's
// sort over all of it but d_branch, which it may read: the scratch ends with the largest
// of the three, and the regions both use lie before them.
TEST(GptModel, ClassifierLogitsAndEmbeddingSortShareTheBlocksScratch) {
  const GptConfig config = tiny_config();
  ActivationDtypes dtypes;
  dtypes.activation = DType::bf16;
  dtypes.device = Device::cuda(0);  // sizes only: the GPU's embedding backward has a scratch
  auto end_of = [](const Region& r) { return r.offset + r.numel * dtype_size(r.dtype); };
  for (const std::size_t chunk_elements : {std::size_t{64}, std::size_t{1} << 22}) {
    dtypes.classifier_chunk_elements = chunk_elements;
    const ActivationLayout layout = ActivationLayout::plan(config, 2, dtypes, config.num_layers);
    EXPECT_EQ(layout.logits_chunk.offset, layout.d_branch.offset);
    EXPECT_GE(layout.embedding_grad_scratch.offset, end_of(layout.d_branch));
    EXPECT_LT(layout.embedding_grad_scratch.offset - end_of(layout.d_branch), ActivationLayout::kRegionAlignment);
    EXPECT_EQ(layout.branch.offset, layout.embedding_grad_scratch.offset);
    EXPECT_GT(layout.embedding_grad_scratch.numel, 0u);
    const std::size_t end =
        std::max({end_of(layout.d_fc), end_of(layout.logits_chunk), end_of(layout.embedding_grad_scratch)});
    EXPECT_GE(layout.scratch_bytes, end);
    EXPECT_LE(layout.scratch_bytes - end, ActivationLayout::kRegionAlignment);
    for (const Region* used : {&layout.losses, &layout.d_ln, &layout.d_residual}) {
      EXPECT_LE(end_of(*used), layout.d_branch.offset);
    }
  }
}

TEST(GptModel, GradReadyOncePerParameterInLayoutOrderWithFinalValues) {
  const GptConfig config = tiny_config();
  GptModel model(config, DType::f32, 2, Device::cpu(), 6);
  const ParamList& params = model.params();
  model.zero_grads();
  for (int micro = 0; micro < 2; ++micro) {
    const auto batch = random_batch(config, 2, 10 + micro);
    std::vector<std::size_t> order;
    std::vector<std::vector<float>> seen(params.size());
    model.forward_backward(batch.view(0), 1.0f, [&](std::size_t p) {
      order.push_back(p);
      const auto grads = model.grads().span<float>().subspan(params[p].offset, params[p].numel);
      seen[p].assign(grads.begin(), grads.end());
    });
    ASSERT_EQ(order.size(), params.size());
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);  // layout order = readiness order
    EXPECT_EQ(params[order.back()].name, "embedding.word_embeddings.weight");
    const auto final_grads = model.grads().span<float>();
    for (std::size_t p = 0; p < params.size(); ++p) {
      EXPECT_TRUE(std::equal(seen[p].begin(), seen[p].end(), final_grads.begin() + params[p].offset))
          << params[p].name << " changed after its ready call";
    }
  }
}

// A forward that reports the weights it needs (the first forward of a step under the optimizer's
// overlap_param_sync) reports each parameter once, in order of first use (the layout's order
// reversed), before any kernel reads it: weights that only arrive when reported (NaN until then,
// as a bucket whose all-gather was not waited for yet) give the loss and gradients of weights that
// were in place from the start. With dropout, in a training pass and a validation pass.
TEST(GptModel, ForwardReportsEachWeightOnceBeforeItsFirstUse) {
  GptConfig config = tiny_config();
  config.hidden_dropout = 0.1f;
  config.attention_dropout = 0.2f;
  for (const bool recorded : {false, true}) {  // model.enable_cuda_graph: the CPU runs each pass directly
    config.cuda_graph = recorded;
    GptModel model(config, DType::f32, 2, Device::cpu(), 31);
    const ParamList& params = model.params();
    const auto batch = random_batch(config, 2, 32);
    const std::vector<float> weights = copy_of<float>(model.weights());
    for (const bool training : {true, false}) {
      SCOPED_TRACE(std::string(recorded ? "recorded, " : "direct, ") + (training ? "training" : "validation"));
      auto run = [&](const WeightNeeds& on_weight_needed) {
        model.zero_grads();
        model.forward_pass(0, 0, batch.view(5), training, on_weight_needed);
        if (!training) return std::pair{model.evaluate_loss(0, 0, batch.view(5)), std::vector<float>{}};
        model.backward_pass(0, 0, batch.view(5), 1.0f);
        return std::pair{model.take_loss_sum(), copy_of<float>(model.grads())};
      };
      const auto expected = run({});
      const std::span<float> live = model.weights().span<float>();
      std::fill(live.begin(), live.end(), std::numeric_limits<float>::quiet_NaN());
      std::vector<std::size_t> order;
      const auto arriving = run(WeightNeeds{
          [&](std::size_t p) {
            order.push_back(p);
            const auto from = weights.begin() + static_cast<std::ptrdiff_t>(params[p].offset);
            std::copy(from, from + static_cast<std::ptrdiff_t>(params[p].numel), live.begin() + params[p].offset);
          },
          {}});
      EXPECT_EQ(arriving.first, expected.first);
      EXPECT_EQ(arriving.second, expected.second);
      ASSERT_EQ(order.size(), params.size());
      for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], params.size() - 1 - i) << i;
    }
  }
}

// With a pending test (the optimizer's buckets of updated weights), a forward waits only for the
// weights still in flight: one wait brings a whole group of parameters (a bucket), and the group's
// other parameters, found in place, cost no wait and, recorded, no pause. The groups here are runs
// of three consecutive parameters; the forward reads them last first, so it waits at each group's
// last parameter, and gives the loss and gradients of weights in place from the start.
TEST(GptModel, ForwardWaitsOnlyForWeightsStillPending) {
  GptConfig config = tiny_config();
  config.hidden_dropout = 0.1f;
  for (const bool recorded : {false, true}) {
    config.cuda_graph = recorded;
    GptModel model(config, DType::f32, 2, Device::cpu(), 37);
    const ParamList& params = model.params();
    const auto batch = random_batch(config, 2, 33);
    const std::vector<float> weights = copy_of<float>(model.weights());
    constexpr std::size_t kGroup = 3;
    for (int step = 0; step < 3; ++step) {  // a recorded pass replays from its third run
      SCOPED_TRACE(std::string(recorded ? "recorded" : "direct") + ", run " + std::to_string(step));
      model.zero_grads();
      model.forward_pass(0, 0, batch.view(5), true);
      model.backward_pass(0, 0, batch.view(5), 1.0f);
      const double expected_loss = model.take_loss_sum();
      const std::vector<float> expected_grads = copy_of<float>(model.grads());

      const std::span<float> live = model.weights().span<float>();
      std::fill(live.begin(), live.end(), std::numeric_limits<float>::quiet_NaN());
      std::vector<std::uint8_t> arrived((params.size() + kGroup - 1) / kGroup, 0);
      std::vector<std::size_t> waits;
      const WeightNeeds needs{
          [&](std::size_t p) {
            waits.push_back(p);
            const std::size_t group = p / kGroup;
            for (std::size_t q = group * kGroup; q < std::min(params.size(), (group + 1) * kGroup); ++q) {
              const auto from = weights.begin() + static_cast<std::ptrdiff_t>(params[q].offset);
              std::copy(from, from + static_cast<std::ptrdiff_t>(params[q].numel), live.begin() + params[q].offset);
            }
            arrived[group] = 1;
          },
          [&](std::size_t p) { return arrived[p / kGroup] == 0; }};
      model.zero_grads();
      model.forward_pass(0, 0, batch.view(5), true, needs);
      model.backward_pass(0, 0, batch.view(5), 1.0f);
      EXPECT_EQ(model.take_loss_sum(), expected_loss);
      EXPECT_EQ(copy_of<float>(model.grads()), expected_grads);
      std::vector<std::size_t> group_lasts;
      for (std::size_t group = arrived.size(); group-- > 0;) {
        group_lasts.push_back(std::min(params.size(), (group + 1) * kGroup) - 1);
      }
      EXPECT_EQ(waits, group_lasts);
    }
  }
}

TEST(GptModel, DropoutMaskFollowsTheSampleNotTheBatch) {
  GptConfig config = tiny_config();
  config.hidden_dropout = 0.1f;
  config.attention_dropout = 0.2f;
  const auto batch = random_batch(config, 2, 7);
  GptModel model(config, DType::f64, 2, Device::cpu(), 8);
  model.zero_grads();
  const double pair_loss = model.forward_backward(batch.view(40), 1.0f);
  const auto pair_grads = copy_of<double>(model.grads());
  // The same samples one at a time, each with its own global index.
  model.zero_grads();
  const double loss_a = model.forward_backward(batch.view(40, 0, 1), 0.5f);
  const double loss_b = model.forward_backward(batch.view(41, 1, 1), 0.5f);
  const auto split_grads = copy_of<double>(model.grads());
  EXPECT_NEAR(pair_loss, (loss_a + loss_b) / 2, 1e-12);
  for (std::size_t i = 0; i < pair_grads.size(); ++i) {
    ASSERT_NEAR(pair_grads[i], split_grads[i], 1e-12 + 1e-9 * std::abs(pair_grads[i])) << i;
  }
  // Dropout is active, repeatable, and changes with the sample index.
  const double eval_a = model.forward_loss(batch.view(40, 0, 1));
  EXPECT_NE(loss_a, eval_a);
  EXPECT_EQ(model.forward_backward(batch.view(40, 0, 1), 0.5f), loss_a);
  EXPECT_NE(model.forward_backward(batch.view(41, 0, 1), 0.5f), loss_a);
}

// model.enable_cuda_graph: the passes run the same kernels (on the CPU directly, which is
// what the recording replays on a GPU: gpu_model_tests), so the losses and gradients are
// the same bits; the finished gradients are reported after the whole backward, in the same
// order. The dropout masks come from each pass's sample index in memory.
TEST(GptModel, RecordedPassesChangeNoBitAndReportGradientsAsTheyAreFinished) {
  GptConfig config = tiny_config();
  config.hidden_dropout = 0.1f;
  config.attention_dropout = 0.2f;
  GptConfig recorded_config = config;
  recorded_config.cuda_graph = true;
  GptModel direct(config, DType::f32, 2, Device::cpu(), 21);
  GptModel recorded(recorded_config, DType::f32, 2, Device::cpu(), 21);
  const ParamList& params = direct.params();
  // Finished by the embedding backward, last (the word embedding's gets the classifier's share first).
  const ParamSpec& position = params[params.index_of("embedding.position_embeddings.weight")];
  const auto batch = random_batch(config, 2, 22);
  // Other sample indices each step, a short micro-batch, a changed loss scale.
  const std::vector<std::pair<MicroBatch, float>> steps = {{batch.view(0), 1.0f},
                                                           {batch.view(2), 1.0f},
                                                           {batch.view(4), 1.0f},
                                                           {batch.view(9, 1, 1), 1.0f},
                                                           {batch.view(6), 0.5f}};
  for (std::size_t s = 0; s < steps.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    direct.zero_grads();
    recorded.zero_grads();
    std::vector<std::size_t> direct_order, recorded_order;
    std::vector<float> first_when_reported, position_when_first_reported;
    const double direct_loss =
        direct.forward_backward(steps[s].first, steps[s].second, [&](std::size_t p) { direct_order.push_back(p); });
    const double recorded_loss = recorded.forward_backward(steps[s].first, steps[s].second, [&](std::size_t p) {
      if (recorded_order.empty()) {
        const auto grads = recorded.grads().span<float>();
        const ParamSpec& first = params[p];
        first_when_reported.assign(grads.begin() + static_cast<std::ptrdiff_t>(first.offset),
                                   grads.begin() + static_cast<std::ptrdiff_t>(first.offset + first.numel));
        const auto position_grads = grads.subspan(position.offset, position.numel);
        position_when_first_reported.assign(position_grads.begin(), position_grads.end());
      }
      recorded_order.push_back(p);
    });
    EXPECT_EQ(recorded_loss, direct_loss);
    EXPECT_EQ(copy_of<float>(recorded.grads()), copy_of<float>(direct.grads()));
    EXPECT_EQ(recorded_order, direct_order);
    ASSERT_EQ(recorded_order.size(), params.size());
    // Reported as each is finished: the first one reported is final then, while the position
    // embedding's, finished last, is still zero.
    const auto final_grads = copy_of<float>(recorded.grads());
    const ParamSpec& first = params[recorded_order.front()];
    EXPECT_TRUE(std::equal(first_when_reported.begin(), first_when_reported.end(),
                           final_grads.begin() + static_cast<std::ptrdiff_t>(first.offset)));
    EXPECT_TRUE(std::all_of(position_when_first_reported.begin(), position_when_first_reported.end(),
                            [](float g) { return g == 0.0f; }));
  }
  EXPECT_EQ(recorded.recorded_passes(), 0);  // the CPU runs every pass directly
  // Validation passes (no dropout) are not recorded and agree too.
  EXPECT_EQ(recorded.forward_loss(batch.view(0)), direct.forward_loss(batch.view(0)));
}

TEST(GptModel, NextTokenLogitsAgreeWithTheLoss) {
  const GptConfig config = tiny_config();
  GptModel model(config, DType::f64, 1, Device::cpu(), 13);
  const auto batch = random_batch(config, 1, 14);
  std::vector<float> logits(static_cast<std::size_t>(config.padded_vocab_size()));
  // The mean over positions of -log softmax(logits of prefix i)[target i] is the loss,
  // which also shows the model is causal.
  double total = 0;
  for (int i = 0; i < config.seq_length; ++i) {
    model.next_token_logits(std::span(batch.tokens).first(static_cast<std::size_t>(i) + 1), logits);
    double max_logit = logits[0], sum = 0;
    for (float v : logits) max_logit = std::max<double>(max_logit, v);
    for (float v : logits) sum += std::exp(v - max_logit);
    total += std::log(sum) + max_logit - logits[batch.targets[i]];
  }
  EXPECT_NEAR(total / config.seq_length, model.forward_loss(batch.view(0)), 1e-6);  // logits come back as fp32
}

TEST(GptModel, RejectsBadInputWithClearErrors) {
  const GptConfig config = tiny_config();
  GptModel model(config, DType::f32, 1, Device::cpu(), 1);
  auto batch = random_batch(config, 2, 1);
  EXPECT_THROW(model.forward_loss(batch.view(0)), Error);  // 2 samples > micro_batch_size 1
  batch.tokens[3] = config.vocab_size;                     // a padding id is not a token
  EXPECT_THROW(model.forward_loss(batch.view(0, 0, 1)), Error);
  EXPECT_THROW(GptModel(config, DType::f32, 1, Device::cuda(0), 1), Error);
  EXPECT_THROW(GptModel(config, DType::i32, 1, Device::cpu(), 1), Error);
}

// GptConfig::grad_buffer (model.optim.grad_sync_dtype): bf16 halves the GPU's gradient buffer;
// the micro-batch scratch and the statistics stay fp32, and the CPU keeps its compute dtype.
TEST(ModelMemory, Bf16GradientBufferOnAGpu) {
  GptConfig config = testing::two_layer_config(768, 12, 2048, 50257);
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(model_dtypes(DType::bf16, gpu).grad_buffer, DType::f32);
  const ModelDtypes bf16_grads = model_dtypes(DType::bf16, gpu, DType::f32, DType::bf16);
  EXPECT_EQ(bf16_grads.grad_buffer, DType::bf16);
  EXPECT_EQ(bf16_grads.grad, DType::f32);
  EXPECT_EQ(model_dtypes(DType::bf16, Device::cpu(), DType::f32, DType::bf16).grad_buffer, DType::f32);
  EXPECT_EQ(model_dtypes(DType::f64, Device::cpu(), DType::f32, DType::bf16).grad_buffer, DType::f64);

  const ModelMemory f32_memory = model_memory(config, DType::bf16, 8, gpu, 0, pipeline_stage(config, 0), 1);
  config.grad_buffer = DType::bf16;
  const ModelMemory bf16_memory = model_memory(config, DType::bf16, 8, gpu, 0, pipeline_stage(config, 0), 1);
  EXPECT_EQ(bf16_memory.grads * 2, f32_memory.grads);
  EXPECT_EQ(bf16_memory.micro_grads, f32_memory.micro_grads);
  EXPECT_EQ(bf16_memory.on_device() + f32_memory.grads / 2, f32_memory.on_device());
  const ModelMemory cpu_memory = model_memory(config, DType::bf16, 8, Device::cpu(), 0, pipeline_stage(config, 0), 1);
  EXPECT_EQ(cpu_memory.grads, f32_memory.grads);
}

// model.classifier_logits_dtype: bf16 makes the GPU's logits chunk bf16, the same rows in half
// the bytes; the CPU keeps its compute dtype. The chunk always holds a row of fp32 statistics
// (next_token_logits writes one there).
TEST(ModelMemory, Bf16ClassifierLogitsOnAGpu) {
  GptConfig config = testing::two_layer_config(768, 12, 2048, 50257);  // GPT-3 126M's width and vocabulary
  const Device gpu = Device::cuda(0);
  const ModelDtypes f32_logits = model_dtypes(DType::bf16, gpu);
  const ModelDtypes bf16_logits = model_dtypes(DType::bf16, gpu, DType::bf16);
  EXPECT_EQ(f32_logits.activations.logits, DType::f32);
  EXPECT_EQ(bf16_logits.activations.logits, DType::bf16);
  EXPECT_EQ(model_dtypes(DType::bf16, Device::cpu(), DType::bf16).activations.logits, DType::f32);
  EXPECT_EQ(model_dtypes(DType::f64, Device::cpu(), DType::bf16).activations.logits, DType::f64);

  const ActivationLayout f32_layout = ActivationLayout::plan(config, 8, f32_logits.activations, 2);
  const ActivationLayout bf16_layout = ActivationLayout::plan(config, 8, bf16_logits.activations, 2);
  EXPECT_EQ(bf16_layout.logits_chunk.dtype, DType::bf16);
  EXPECT_EQ(bf16_layout.logits_chunk.numel, f32_layout.logits_chunk.numel);
  EXPECT_EQ(bf16_layout.classifier_chunk_rows, f32_layout.classifier_chunk_rows);
  EXPECT_EQ(bf16_layout.logits_chunk.numel, bf16_layout.classifier_chunk_rows * 50304);
  // The chunk (10,672 rows: 2^29 logits) is the largest scratch region: half of its bytes go.
  EXPECT_EQ(f32_layout.scratch_bytes - bf16_layout.scratch_bytes, bf16_layout.logits_chunk.numel * 2);

  config.seq_length = config.max_position_embeddings = 1;  // one token: a chunk of one row
  const ActivationLayout one_token = ActivationLayout::plan(config, 1, bf16_logits.activations, 2);
  EXPECT_EQ(one_token.classifier_chunk_rows, 1u);
  EXPECT_EQ(one_token.logits_chunk.numel * dtype_size(DType::bf16), 50304 * dtype_size(DType::f32));
}

// The attention backward's score scratch: one 64 x 64 bf16 tile per key and query tile pair on
// or below the diagonal, per sample and local head (kernels/flash_attention_scores.h), on a
// GPU with attention dropout or at head size 128, and taken into the model's memory where it
// adds at most a sixth of the activations.
TEST(ModelMemory, AttentionScoreScratchWithAttentionDropoutOnAGpu) {
  GptConfig config = testing::two_layer_config(768, 12, 2048, 50257);  // GPT-3 126M
  config.num_layers = 12;
  config.attention_dropout = 0.1f;
  const Device gpu = Device::cuda(0);
  // 32 tiles a sequence: 32 * 33 / 2 = 528 pairs of 8 KiB, for 8 samples of 12 heads.
  const std::size_t scores = std::size_t{8} * 12 * 528 * 8192;
  EXPECT_EQ(attention_score_scratch_bytes(config, 8, gpu), scores);
  EXPECT_EQ(attention_score_scratch_bytes(config, 8, Device::cpu()), 0u);
  EXPECT_EQ(attention_score_scratch_bytes(config, 0, gpu), 0u);
  const ModelMemory with_scratch = model_memory(config, DType::bf16, 8, gpu, 0, pipeline_stage(config, 0), 1);
  ASSERT_GE(with_scratch.activations, kAttentionScoresShare * scores);
  EXPECT_EQ(with_scratch.attention_scores, scores);  // all 96 slots at once

  GptConfig tensor_parallel = config;  // each rank holds its 6 heads' tiles
  tensor_parallel.tensor_parallel_size = 2;
  EXPECT_EQ(attention_score_scratch_bytes(tensor_parallel, 8, gpu), scores / 2);

  GptConfig no_dropout = config;  // without dropout at head size 64, recomputing is faster: none
  no_dropout.attention_dropout = 0.0f;
  EXPECT_EQ(attention_score_scratch_bytes(no_dropout, 8, gpu), 0u);
  const ModelMemory without_scratch =
      model_memory(no_dropout, DType::bf16, 8, gpu, 0, pipeline_stage(no_dropout, 0), 1);
  EXPECT_EQ(without_scratch.attention_scores, 0u);
  // The row statistics the backward's passes share are held on a GPU with or without dropout:
  // 16 bytes a (sample, position, head).
  EXPECT_EQ(without_scratch.attention_statistics, std::size_t{8} * 2048 * 12 * 16);
  EXPECT_EQ(with_scratch.attention_statistics, without_scratch.attention_statistics);
  EXPECT_EQ(
      model_memory(no_dropout, DType::bf16, 8, Device::cpu(), 0, pipeline_stage(no_dropout, 0), 1).attention_statistics,
      0u);
  EXPECT_EQ(without_scratch.on_device(),
            without_scratch.weights + without_scratch.working_weights + without_scratch.grads +
                without_scratch.micro_grads + without_scratch.activations + without_scratch.tokens +
                without_scratch.targets + without_scratch.pass_samples + without_scratch.attention_statistics);

  GptConfig head_size_128 = config;  // GPT-3 1.3B's head size: 4 samples of 16 heads
  head_size_128.hidden_size = 2048;
  head_size_128.num_attention_heads = 16;
  EXPECT_EQ(attention_score_scratch_bytes(head_size_128, 4, gpu), std::size_t{4} * 16 * 528 * 8192);
  EXPECT_EQ(model_memory(head_size_128, DType::bf16, 4, gpu, 0, pipeline_stage(head_size_128, 0), 1).attention_scores,
            std::size_t{4} * 16 * 528 * 8192);
  GptConfig head_size_128_no_dropout = head_size_128;  // reading them is faster there without dropout too
  head_size_128_no_dropout.attention_dropout = 0.0f;
  EXPECT_EQ(attention_score_scratch_bytes(head_size_128_no_dropout, 4, gpu), std::size_t{4} * 16 * 528 * 8192);
  EXPECT_EQ(attention_score_scratch_bytes(head_size_128_no_dropout, 4, Device::cpu()), 0u);
  GptConfig head_size_80 = config;  // GPT-3 2.7B's: 4 samples of 32 heads, the same tiles a head
  head_size_80.hidden_size = 2560;
  head_size_80.num_attention_heads = 32;
  EXPECT_EQ(attention_score_scratch_bytes(head_size_80, 4, gpu), std::size_t{4} * 32 * 528 * 8192);

  // Sequence 8192, micro-batch 2: 128 * 129 / 2 = 8256 pairs a head, 1.6 GB for 24 slots, more
  // than a sixth of the same tokens' activations. The model takes what fits there, rounded down
  // to the larger of two even groups (the backward runs its passes a group at a time).
  GptConfig long_sequence = config;
  long_sequence.seq_length = long_sequence.max_position_embeddings = 8192;
  const std::size_t slot = std::size_t{8256} * 8192;
  EXPECT_EQ(attention_score_scratch_bytes(long_sequence, 2, gpu), 24 * slot);
  const ModelMemory long_memory =
      model_memory(long_sequence, DType::bf16, 2, gpu, 0, pipeline_stage(long_sequence, 0), 1);
  const std::size_t fitting = long_memory.activations / kAttentionScoresShare / slot;
  ASSERT_GE(fitting, 12u);
  ASSERT_LT(fitting, 24u);
  EXPECT_EQ(long_memory.attention_scores, 12 * slot);
  // With only a fifth of that room, three groups of 8 slots (512 key tiles: still enough blocks).
  EXPECT_EQ(attention_score_scratch_taken(long_sequence, 2, gpu, 8 * kAttentionScoresShare * slot + 1), 8 * slot);
  EXPECT_EQ(attention_score_scratch_taken(long_sequence, 2, gpu, 10 * kAttentionScoresShare * slot), 8 * slot);
  EXPECT_EQ(attention_score_scratch_taken(long_sequence, 2, gpu, 5 * kAttentionScoresShare * slot), 5 * slot);
  // Groups of 3 (384 key tiles) would leave the passes' blocks short of filling the GPU: none.
  EXPECT_EQ(attention_score_scratch_taken(long_sequence, 2, gpu, 4 * kAttentionScoresShare * slot), 4 * slot);
  EXPECT_EQ(attention_score_scratch_taken(long_sequence, 2, gpu, 4 * kAttentionScoresShare * slot - 1), 0u);

  // One layer at sequence 8192 and micro-batch 1, with a vocabulary small enough that the
  // logits do not outweigh the layer: a sixth of its activations holds fewer slots than fill
  // the GPU, so none are taken.
  GptConfig short_model = long_sequence;
  short_model.num_layers = 1;
  short_model.vocab_size = 8192;
  const ModelMemory short_memory = model_memory(short_model, DType::bf16, 1, gpu, 0, pipeline_stage(short_model, 0), 1);
  ASSERT_LT(short_memory.activations / kAttentionScoresShare / slot, 4u);
  EXPECT_EQ(short_memory.attention_scores, 0u);
}

}  // namespace
}  // namespace adamant::model
