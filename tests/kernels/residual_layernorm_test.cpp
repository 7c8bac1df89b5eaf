// The residual add and layernorm of kernels/residual_layernorm.h on the CPU: the sum and
// its layernorm against both in closed form (fp64), the dropout's zeros where dropout()
// puts them, and the refusal of a residual written over x.
#include "adamant/kernels/residual_layernorm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

}  // namespace
}  // namespace adamant::kernels
