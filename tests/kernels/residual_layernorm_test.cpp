// The residual add and layernorm of kernels/residual_layernorm.h on the CPU: the sum and
// its layernorm against both in closed form (fp64), the dropout's zeros where dropout()
// puts them, and the refusal of a residual written over x. Its backward against the
// layernorm's gradient in closed form, the branch's gradient through the same mask, and
// the branch bias's column sums.
#include "adamant/kernels/residual_layernorm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/workspace_test_util.h"
#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using ::testing::HasSubstr;
using testing::random_normal;
using testing::view;

constexpr double kEpsilon = 1e-5;

TEST(ResidualLayernorm, SumAndItsLayernormInClosedForm) {
  Stream stream;
  const RowsShape shape{6, 12};  // two samples of three rows
  auto x = random_normal(72, 1, 2.0), branch = random_normal(72, 2), weight = random_normal(12, 3),
       bias = random_normal(12, 4);
  DropoutArgs args;
  args.probability = 0.25f;
  args.seed = 77;
  args.site = 5;
  // The mask dropout() draws for the same elements: out is 0 or in / (1 - p).
  std::vector<double> ones(72, 1.0), mask(72);
  dropout(view(ones), view(mask), 72, 36, args, stream);
  std::vector<double> residual(72), out(72), mean(6), rstd(6);
  residual_layernorm_forward(view(x), {view(branch), args, 36}, view(residual), {view(weight), view(bias), kEpsilon},
                             view(out), view(mean), view(rstd), shape, stream);
  int dropped = 0;
  for (int r = 0; r < 6; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 12; ++c) {
      const int i = r * 12 + c;
      dropped += mask[i] == 0.0 ? 1 : 0;
      ASSERT_TRUE(mask[i] == 0.0 || std::abs(mask[i] - 1.0 / 0.75) < 1e-12) << i;
      EXPECT_NEAR(residual[i], x[i] + mask[i] * branch[i], 1e-12) << i;
      m += residual[i] / 12;
    }
    for (int c = 0; c < 12; ++c) v += (residual[r * 12 + c] - m) * (residual[r * 12 + c] - m) / 12;
    EXPECT_NEAR(mean[r], m, 1e-12);
    EXPECT_NEAR(rstd[r], 1 / std::sqrt(v + kEpsilon), 1e-12);
    for (int c = 0; c < 12; ++c) {
      const int i = r * 12 + c;
      EXPECT_NEAR(out[i], (residual[i] - m) / std::sqrt(v + kEpsilon) * weight[c] + bias[c], 1e-12) << i;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 72);
}

TEST(ResidualLayernorm, TheSumMayTakeTheBranchsPlace) {
  Stream stream;
  const RowsShape shape{4, 8};
  auto x = random_normal(32, 5), branch = random_normal(32, 6), weight = random_normal(8, 7),
       bias = random_normal(8, 8);
  DropoutArgs args;
  args.probability = 0.5f;
  args.first_element = 16;  // a shard from the third row of the batch on
  std::vector<double> residual(32), out(32), mean(4), rstd(4);
  residual_layernorm_forward(view(x), {view(branch), args, 16}, view(residual), {view(weight), view(bias), kEpsilon},
                             view(out), view(mean), view(rstd), shape, stream);
  std::vector<double> in_place = branch, out_in_place(32), mean_in_place(4), rstd_in_place(4);
  residual_layernorm_forward(view(x), {view(in_place), args, 16}, view(in_place), {view(weight), view(bias), kEpsilon},
                             view(out_in_place), view(mean_in_place), view(rstd_in_place), shape, stream);
  EXPECT_EQ(in_place, residual);
  EXPECT_EQ(out_in_place, out);
  EXPECT_EQ(mean_in_place, mean);
  EXPECT_EQ(rstd_in_place, rstd);
}

TEST(ResidualLayernorm, ResidualOverXIsRefused) {
  Stream stream;
  const RowsShape shape{2, 8};
  auto x = random_normal(16, 9), branch = random_normal(16, 10), weight = random_normal(8, 11),
       bias = random_normal(8, 12);
  const std::vector<double> x_before = x;
  std::vector<double> out(16), mean(2), rstd(2);
  try {
    residual_layernorm_forward(view(x), {view(branch), DropoutArgs{}, 16}, view(x),
                               {view(weight), view(bias), kEpsilon}, view(out), view(mean), view(rstd), shape, stream);
    FAIL() << "a residual over x was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("residual is x's memory"));
  }
  EXPECT_EQ(x, x_before);
}

// The closed-form gradients of a layernorm of x [rows, cols]: d_x, d_weight and d_bias.
struct LayernormGrads {
  std::vector<double> d_x, d_weight, d_bias, mean, rstd;
};
LayernormGrads layernorm_grads(const std::vector<double>& x, const std::vector<double>& dy,
                               const std::vector<double>& weight, int rows, int cols) {
  LayernormGrads g{std::vector<double>(x.size()), std::vector<double>(cols), std::vector<double>(cols),
                   std::vector<double>(rows), std::vector<double>(rows)};
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < cols; ++c) m += x[r * cols + c] / cols;
    for (int c = 0; c < cols; ++c) v += (x[r * cols + c] - m) * (x[r * cols + c] - m) / cols;
    const double rstd = 1 / std::sqrt(v + kEpsilon);
    g.mean[r] = m;
    g.rstd[r] = rstd;
    double mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (int c = 0; c < cols; ++c) {
      const int i = r * cols + c;
      const double xhat = (x[i] - m) * rstd;
      mean_dxhat += dy[i] * weight[c] / cols;
      mean_dxhat_xhat += dy[i] * weight[c] * xhat / cols;
      g.d_weight[c] += dy[i] * xhat;
      g.d_bias[c] += dy[i];
    }
    for (int c = 0; c < cols; ++c) {
      const int i = r * cols + c;
      const double xhat = (x[i] - m) * rstd;
      g.d_x[i] = rstd * (dy[i] * weight[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  return g;
}

TEST(ResidualLayernorm, BackwardGivesTheStreamItsGradientAndTheBranchItsDroppedShare) {
  Stream stream;
  Workspace workspace(stream, testing::all_workspace_needs());
  constexpr int kRows = 6, kCols = 12;  // two samples of three rows
  const RowsShape shape{kRows, kCols};
  auto x = random_normal(72, 21, 2.0), dy = random_normal(72, 22), weight = random_normal(12, 23),
       d_residual = random_normal(72, 24);
  LayernormGrads expected = layernorm_grads(x, dy, weight, kRows, kCols);
  for (const float probability : {0.25f, 0.0f}) {
    SCOPED_TRACE(probability);
    DropoutArgs args;
    args.probability = probability;
    args.seed = 91;
    args.site = 7;
    args.first_element = 24;  // a shard from the third row of the batch on
    std::vector<double> ones(72, 1.0), mask(72);
    dropout(view(ones), view(mask), 72, 36, args, stream);
    std::vector<double> stream_grad = d_residual, d_branch(72, -1.0), d_weight(12), d_bias(12), branch_bias(12);
    residual_layernorm_backward(view(dy), view(x), view(weight), view(expected.mean), view(expected.rstd),
                                view(stream_grad), view(d_weight), view(d_bias),
                                {view(d_branch), args, 36, view(branch_bias)}, shape, workspace, stream);
    std::vector<double> branch_sums(12, 0.0);
    int dropped = 0;
    for (int i = 0; i < 72; ++i) {
      EXPECT_NEAR(stream_grad[i], d_residual[i] + expected.d_x[i], 1e-12) << i;
      // Without dropout the branch's gradient is the stream's own, and d_branch is not written.
      const double branch = probability > 0.0f ? mask[i] * stream_grad[i] : stream_grad[i];
      if (probability > 0.0f) {
        EXPECT_NEAR(d_branch[i], branch, 1e-12) << i;
      } else {
        EXPECT_EQ(d_branch[i], -1.0) << i;
      }
      dropped += mask[i] == 0.0 ? 1 : 0;
      branch_sums[i % 12] += branch;
    }
    if (probability > 0.0f) {
      EXPECT_GT(dropped, 0);
      EXPECT_LT(dropped, 72);
    }
    for (int c = 0; c < 12; ++c) {
      EXPECT_NEAR(d_weight[c], expected.d_weight[c], 1e-12) << c;
      EXPECT_NEAR(d_bias[c], expected.d_bias[c], 1e-12) << c;
      EXPECT_NEAR(branch_bias[c], branch_sums[c], 1e-12) << c;
    }
  }
}

TEST(ResidualLayernorm, BackwardRefusesABranchGradientOverTheStreams) {
  Stream stream;
  Workspace workspace(stream, testing::all_workspace_needs());
  const RowsShape shape{2, 8};
  auto x = random_normal(16, 25), dy = random_normal(16, 26), weight = random_normal(8, 27),
       d_residual = random_normal(16, 28);
  const std::vector<double> before = d_residual;
  std::vector<double> mean(2, 0.0), rstd(2, 1.0), d_weight(8), d_bias(8);
  DropoutArgs args;
  args.probability = 0.1f;
  try {
    residual_layernorm_backward(view(dy), view(x), view(weight), view(mean), view(rstd), view(d_residual),
                                view(d_weight), view(d_bias), {view(d_residual), args, 16, {}}, shape, workspace,
                                stream);
    FAIL() << "a branch gradient over the stream's was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("d_branch is d_residual's memory"));
  }
  EXPECT_EQ(d_residual, before);
}

}  // namespace
}  // namespace adamant::kernels
