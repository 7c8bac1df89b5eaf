// Single-process optimizer tests: bad options name their NeMo key; the first
// step of both optimizers against Adam's closed form (from m = v = 0 the update
// is g / (|g| + eps) + wd * p); buffers, padding and bookkeeping.
#include "adamant/optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "adamant/comm/single_process_communicator.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "support/test_data.h"
#include "synthetic_model.h"

namespace adamant::optim {
namespace {

using testing::SyntheticModel;

OptimizerOptions options_for(const char* name, DType dtype) {
  OptimizerOptions o;
  o.name = name;
  o.model_dtype = dtype;
  o.megatron_amp_O2 = true;
  o.gradient_clip_val = 0.0;
  o.bucket_cap_mb = 0.002;  // 524 fp32 gradients: several buckets on the test model
  o.weight_decay = 0.1;
  return o;
}

void expect_error_naming(const OptimizerOptions& options, const char* key) {
  comm::SingleProcessCommunicator comm;
  const Stream stream;
  try {
    make_optimizer(options, testing::synthetic_params(), comm, stream);
    ADD_FAILURE() << "accepted bad options; expected an error naming " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(OptimizerOptions, BadInputNamesTheKey) {
  OptimizerOptions o = options_for("adam", DType::bf16);
  expect_error_naming(o, "model.optim.name");
  o = options_for("distributed_fused_adam", DType::bf16);
  o.megatron_amp_O2 = false;
  expect_error_naming(o, "model.megatron_amp_O2");
  o = options_for("distributed_fused_adam", DType::f16);
  o.store_param_remainders = true;
  expect_error_naming(o, "model.optim.store_param_remainders");
  o = options_for("distributed_fused_adam", DType::bf16);
  o.bucket_cap_mb = 0;
  expect_error_naming(o, "model.optim.bucket_cap_mb");
  o.bucket_cap_mb = -3;
  expect_error_naming(o, "model.optim.bucket_cap_mb");
  o = options_for("distributed_fused_adam", DType::bf16);
  o.grad_sync_dtype = DType::f16;
  expect_error_naming(o, "model.optim.grad_sync_dtype");
  o = options_for("fused_adam", DType::bf16);
  o.grad_sync_dtype = DType::bf16;
  expect_error_naming(o, "model.optim.grad_sync_dtype");
  o = options_for("fused_adam", DType::bf16);
  o.beta2 = 1.0;
  expect_error_naming(o, "model.optim.betas");
  o = options_for("distributed_fused_adam", DType::f16);
  o.hysteresis = 0;
  expect_error_naming(o, "model.hysteresis");
}

struct FirstStepCase {
  const char* name;
  DType dtype;
  bool adamw;
};

class FirstStep : public ::testing::TestWithParam<FirstStepCase> {};

TEST_P(FirstStep, MatchesAdamClosedForm) {
  const FirstStepCase c = GetParam();
  comm::SingleProcessCommunicator comm;
  const Stream stream;
  const ParamList params = testing::synthetic_params();
  OptimizerOptions options = options_for(c.name, c.dtype);
  options.adam_w_mode = c.adamw;
  auto optimizer = make_optimizer(options, params, comm, stream);
  SyntheticModel model(params, c.dtype, optimizer->padded_numel());
  model.init_weights();
  const std::vector<float> w0 = model.weights_f32();
  optimizer->attach(model.weights(), model.grads());
  EXPECT_EQ(optimizer->loss_scale(), 1.0);

  testing::RunConfig run;
  run.micro_batches_per_rank = 3;
  const auto results = testing::run_steps(*optimizer, model, 0, 1, run);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].skipped);
  EXPECT_EQ(optimizer->step_count(), 1);
  const double lr = learning_rate(run.schedule, 0);
  const double beta1 = static_cast<float>(options.beta1), beta2 = static_cast<float>(options.beta2);  // as the kernel

  // The summed and the mean gradient and its norm, in double, from the initial weights.
  std::vector<float> summed(params.total_numel, 0.0f);  // the model sums micro-batches in fp32
  std::vector<double> mean(params.total_numel, 0.0);
  double squared = 0;
  for (std::size_t i = 0; i < params.total_numel; ++i) {
    for (int s = 0; s < 3; ++s) summed[i] += SyntheticModel::sample_gradient(w0[i], s, i);
    mean[i] = summed[i] / 3.0;
    squared += mean[i] * mean[i];
  }
  EXPECT_NEAR(results[0].grad_norm, std::sqrt(squared), 1e-6 * std::sqrt(squared));

  const auto dir = adamant::testing::temp_dir("optim-first-step");
  optimizer->save(dir);
  const testing::FlatState state = testing::read_flat_state(dir, params);
  for (const ParamSpec& spec : params.params) {
    const double wd = spec.weight_decay ? 0.1 : 0.0;
    for (std::size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      const double p0 = w0[i];
      const double g = mean[i] + (c.adamw ? 0.0 : wd * p0);
      // m_hat = g and sqrt(v_hat) = |g|: the update is g / (|g| + eps), sign(g) unless g is tiny.
      const double expected = p0 - lr * (g / (std::abs(g) + 1e-8) + (c.adamw ? wd * p0 : 0.0));
      ASSERT_NEAR(state.main[i], expected, 2e-7 + 1e-6 * std::abs(expected)) << spec.name << " " << i;
      // fp32 rounding of g is relative to its terms (L2 mode adds wd * p, which may nearly cancel the mean).
      const double g_error = 2e-6 * (std::abs(mean[i]) + wd * std::abs(p0));
      ASSERT_NEAR(state.exp_avg[i], (1 - beta1) * g, 0.1 * g_error + 1e-12) << spec.name << " " << i;
      ASSERT_NEAR(state.exp_avg_sq[i], (1 - beta2) * g * g, 0.001 * g_error * (2 * std::abs(g) + g_error) + 1e-15)
          << spec.name << " " << i;
      if (c.dtype == DType::bf16) {
        ASSERT_EQ(model.weight_bits()[i], bf16_round_for_remainder(state.main[i])) << i;
      } else {
        ASSERT_EQ(model.weight(i), state.main[i]) << i;
      }
    }
  }
  // Padding never changes. The step leaves the gradients (one rank: the micro-batches' sum, as
  // the model made it) for the next step to write over, and their padding zero.
  for (std::size_t i = params.total_numel; i < optimizer->padded_numel(); ++i) ASSERT_EQ(model.weight(i), 0.0f);
  const auto* grads = static_cast<const float*>(model.grads().data);
  for (std::size_t i = 0; i < params.total_numel; ++i) ASSERT_EQ(grads[i], summed[i]) << i;
  for (std::size_t i = params.total_numel; i < optimizer->padded_numel(); ++i) ASSERT_EQ(grads[i], 0.0f) << i;
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, FirstStep,
                         ::testing::Values(FirstStepCase{"fused_adam", DType::f32, true},
                                           FirstStepCase{"fused_adam", DType::bf16, true},
                                           FirstStepCase{"fused_adam", DType::bf16, false},
                                           FirstStepCase{"distributed_fused_adam", DType::bf16, true},
                                           FirstStepCase{"distributed_fused_adam", DType::bf16, false}),
                         [](const auto& info) {
                           return std::string(info.param.name) + "_" + std::string(dtype_name(info.param.dtype)) +
                                  (info.param.adamw ? "_AdamW" : "_L2");
                         });

TEST(Optimizer, StateBytesAndAttachChecks) {
  comm::SingleProcessCommunicator comm;
  const Stream stream;
  const ParamList params = testing::synthetic_params();
  auto fused_f32 = make_optimizer(options_for("fused_adam", DType::f32), params, comm, stream);
  auto fused_bf16 = make_optimizer(options_for("fused_adam", DType::bf16), params, comm, stream);
  auto dfa = make_optimizer(options_for("distributed_fused_adam", DType::bf16), params, comm, stream);
  // fp32 model: exp_avg + exp_avg_sq only; O2: plus fp32 main weights. 3129 weights padded to 3136.
  EXPECT_EQ(fused_f32->padded_numel(), 3136u);
  EXPECT_EQ(fused_f32->state_bytes(), 8u * 3136);
  EXPECT_EQ(fused_bf16->state_bytes(), 12u * 3136);
  EXPECT_EQ(dfa->state_bytes(), 12u * dfa->padded_numel());

  SyntheticModel wrong_size(params, DType::bf16, params.total_numel);
  EXPECT_THROW(fused_bf16->attach(wrong_size.weights(), wrong_size.grads()), Error);
  SyntheticModel wrong_dtype(params, DType::f16, fused_bf16->padded_numel());
  EXPECT_THROW(fused_bf16->attach(wrong_dtype.weights(), wrong_dtype.grads()), Error);
  EXPECT_THROW(fused_bf16->step(1e-3, 1.0), Error);  // not attached

  SyntheticModel model(params, DType::bf16, dfa->padded_numel());
  dfa->attach(model.weights(), model.grads());
  dfa->on_grad_ready(0);
  EXPECT_THROW(dfa->on_grad_ready(0), Error);  // reported twice
  EXPECT_THROW(dfa->on_grad_ready(params.size()), Error);
}

}  // namespace
}  // namespace adamant::optim
