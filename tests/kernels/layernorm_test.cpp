#include "adamant/kernels/layernorm.h"

#include <gtest/gtest.h>

#include "model_kernels_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

TEST(LayerNorm, ForwardNormalisesEachRow) {
  Stream stream;
  const RowsShape shape{4, 10};
  auto x = random_normal(40, 1, 3.0), weight = random_normal(10, 2), bias = random_normal(10, 3);
  std::vector<double> out(40), mean(4), rstd(4);
  layernorm_forward(view(x), view(weight), view(bias), 1e-5, view(out), view(mean), view(rstd), shape, stream);
  for (int r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 10; ++c) m += x[r * 10 + c] / 10;
    for (int c = 0; c < 10; ++c) v += (x[r * 10 + c] - m) * (x[r * 10 + c] - m) / 10;
    EXPECT_NEAR(mean[r], m, 1e-12);
    EXPECT_NEAR(rstd[r], 1 / std::sqrt(v + 1e-5), 1e-12);
    for (int c = 0; c < 10; ++c) {
      EXPECT_NEAR(out[r * 10 + c], (x[r * 10 + c] - m) / std::sqrt(v + 1e-5) * weight[c] + bias[c], 1e-12);
    }
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferencesAndAccumulatesIntoDx) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const RowsShape shape{3, 8};
  auto x = random_normal(24, 4, 2.0), weight = random_normal(8, 5), bias = random_normal(8, 6);
  const auto probe = random_normal(24, 7);
  std::vector<double> out(24), mean(3), rstd(3);
  auto loss = [&] {
    layernorm_forward(view(x), view(weight), view(bias), 1e-5, view(out), view(mean), view(rstd), shape, stream);
    return testing::dot(out, probe);
  };
  loss();
  auto d_out = probe;
  const std::vector<double> prior(24, 0.25);
  auto d_x = prior;
  std::vector<double> d_weight(8, 99.0), d_bias(8, 99.0);
  layernorm_backward(view(d_out), view(x), view(weight), view(mean), view(rstd), view(d_x), view(d_weight),
                     view(d_bias), shape, workspace, stream);
  for (double& v : d_x) v -= 0.25;  // what was added
  testing::expect_gradient(x, d_x, loss, "d_x");
  testing::expect_gradient(weight, d_weight, loss, "d_weight");
  testing::expect_gradient(bias, d_bias, loss, "d_bias");
}

}  // namespace
}  // namespace adamant::kernels
