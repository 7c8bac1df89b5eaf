// Every parameter's gradient of the whole model against central finite differences, in fp64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "model_test_util.h"

namespace adamant::model {
namespace {

// Spreads the weights away from their init (layernorm weights 1, biases 0, small
// matrices) so that every term of every gradient is exercised.
void perturb_weights(GptModel& model, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.15);
  const Tensor weights = model.weights();  // a named view: g++ 13 flags a range over a temporary's span
  for (double& w : weights.span<double>()) w += noise(rng);
}

template <typename LossFn>
void check_all_parameters(GptModel& model, const std::vector<double>& analytic, LossFn&& loss) {
  std::mt19937 rng(3);
  const double step = 1e-5;
  auto weights = model.weights().span<double>();
  int checked = 0;
  for (const ParamSpec& spec : model.params().params) {
    // Every element of small parameters, a random sample of big ones.
    std::vector<std::size_t> elements;
    if (spec.numel <= 64) {
      for (std::size_t i = 0; i < spec.numel; ++i) elements.push_back(i);
    } else {
      std::uniform_int_distribution<std::size_t> pick(0, spec.numel - 1);
      for (int i = 0; i < 24; ++i) elements.push_back(pick(rng));
    }
    for (const std::size_t i : elements) {
      double& w = weights[spec.offset + i];
      const double saved = w;
      w = saved + step;
      const double plus = loss();
      w = saved - step;
      const double minus = loss();
      w = saved;
      const double numeric = (plus - minus) / (2 * step);
      const double exact = analytic[spec.offset + i];
      EXPECT_NEAR(exact, numeric, 1e-6 * std::max(std::abs(exact), std::abs(numeric)) + 1e-9)
          << spec.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 400);
}

TEST(GptGradient, EveryParameterMatchesFiniteDifferences) {
  const GptConfig config = testing::tiny_config();
  GptModel model(config, DType::f64, 2, Device::cpu(), 11);
  perturb_weights(model, 1);
  const auto batch = testing::random_batch(config, 2, 2);
  const float loss_scale = 4.0f;  // grads hold d(loss_scale * loss)/dw
  model.zero_grads();
  model.forward_backward(batch.view(0), loss_scale);
  auto analytic = testing::copy_of<double>(model.grads());
  for (double& g : analytic) g /= loss_scale;
  // The tied word embedding's padding rows get gradient from the softmax only.
  check_all_parameters(model, analytic, [&] { return model.forward_loss(batch.view(0)); });
}

TEST(GptGradient, WithDropoutMatchesFiniteDifferencesOfTheSameMasks) {
  GptConfig config = testing::tiny_config();
  config.hidden_dropout = 0.2f;
  config.attention_dropout = 0.3f;
  GptModel model(config, DType::f64, 2, Device::cpu(), 12);
  perturb_weights(model, 4);
  const auto batch = testing::random_batch(config, 2, 5);
  model.zero_grads();
  const double loss = model.forward_backward(batch.view(1000), 1.0f);
  const auto analytic = testing::copy_of<double>(model.grads());
  EXPECT_NE(loss, model.forward_loss(batch.view(1000)));  // dropout was on
  // The same global sample indices give the same masks, so the loss is a smooth function.
  check_all_parameters(model, analytic, [&] { return model.forward_backward(batch.view(1000), 1.0f); });
}

}  // namespace
}  // namespace adamant::model
