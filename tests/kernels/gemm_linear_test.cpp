#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "adamant/kernels/cpu/model_kernels_cpu.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/linear.h"
#include "model_kernels_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

// c = alpha * op(a) op(b) + beta * c by the definition, in fp64.
std::vector<double> naive_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const std::vector<double>& a,
                               const std::vector<double>& b, double beta, std::vector<double> c) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) sum += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = alpha * sum + beta * c[i * n + j];
    }
  }
  return c;
}

TEST(Gemm, AllTransposesMatchTheDefinition) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const int m = 37, n = 29, k = 71;  // odd sizes cross the blocking boundaries
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const auto a = random_normal(m * k, 1), b = random_normal(k * n, 2), c0 = random_normal(m * n, 3);
      const Transpose op_a = ta ? Transpose::yes : Transpose::no, op_b = tb ? Transpose::yes : Transpose::no;
      for (const double beta : {0.0, 1.0, -0.5}) {
        const auto expected = naive_gemm(ta, tb, m, n, k, 0.75, a, b, beta, c0);
        auto a64 = a, b64 = b, c64 = c0;
        gemm(op_a, op_b, m, n, k, 0.75, view(a64), view(b64), beta, view(c64), workspace, stream);
        auto c_blocked = c0;
        cpu::gemm_blocked<double>(op_a, op_b, m, n, k, 0.75, a.data(), b.data(), beta, c_blocked.data());
        auto a32 = testing::to_float(a), b32 = testing::to_float(b), c32 = testing::to_float(c0);
        gemm(op_a, op_b, m, n, k, 0.75, view(a32), view(b32), beta, view(c32), workspace, stream);
        for (int i = 0; i < m * n; ++i) {
          ASSERT_NEAR(c64[i], expected[i], 1e-12) << ta << tb << beta << " at " << i;
          ASSERT_NEAR(c_blocked[i], expected[i], 1e-12) << ta << tb << beta << " at " << i;
          ASSERT_NEAR(c32[i], expected[i], 1e-4) << ta << tb << beta << " at " << i;
        }
      }
    }
  }
}

TEST(Gemm, BetaZeroIgnoresNaNInOutput) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  std::vector<double> a{1, 2}, b{3, 4}, c(4, std::nan(""));
  gemm(Transpose::no, Transpose::no, 2, 2, 1, 1.0, view(a), view(b), 0.0, view(c), workspace, stream);
  EXPECT_EQ(c, (std::vector<double>{3, 4, 6, 8}));
}

TEST(Gemm, RejectsMismatchedOperands) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  std::vector<double> a(6), b(6), c(4);
  std::vector<float> c32(4);
  EXPECT_THROW(gemm(Transpose::no, Transpose::no, 2, 2, 3, 1.0, view(a), view(b), 0.0, view(c32), workspace, stream),
               Error);
  EXPECT_THROW(gemm(Transpose::no, Transpose::no, 2, 2, 4, 1.0, view(a), view(b), 0.0, view(c), workspace, stream),
               Error);
}

TEST(Linear, ForwardMatchesDefinitionAndBackwardMatchesFiniteDifferences) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const LinearShape shape{5, 7, 3};
  auto in = random_normal(5 * 7, 11), weight = random_normal(3 * 7, 12), bias = random_normal(3, 13);
  const auto probe = random_normal(5 * 3, 14);  // loss = sum(out * probe)
  std::vector<double> out(5 * 3);
  auto loss = [&] {
    linear_forward(view(in), view(weight), view(bias), view(out), shape, workspace, stream);
    return testing::dot(out, probe);
  };
  loss();
  for (int r = 0; r < 5; ++r) {
    for (int o = 0; o < 3; ++o) {
      double expected = bias[o];
      for (int i = 0; i < 7; ++i) expected += in[r * 7 + i] * weight[o * 7 + i];
      EXPECT_NEAR(out[r * 3 + o], expected, 1e-12);
    }
  }
  auto d_out = probe;
  std::vector<double> d_in(in.size(), 99.0), d_weight(weight.size(), 99.0), d_bias(bias.size(), 99.0);
  linear_backward(view(d_out), view(in), view(weight), view(d_in), view(d_weight), view(d_bias), shape, workspace,
                  stream);
  testing::expect_gradient(in, d_in, loss, "d_in");
  testing::expect_gradient(weight, d_weight, loss, "d_weight");
  testing::expect_gradient(bias, d_bias, loss, "d_bias");
  // An empty d_in skips that product and leaves the parameter gradients alike.
  std::vector<double> d_weight2(weight.size()), d_bias2(bias.size());
  linear_backward(view(d_out), view(in), view(weight), Tensor{}, view(d_weight2), view(d_bias2), shape, workspace,
                  stream);
  EXPECT_EQ(d_weight2, d_weight);
  EXPECT_EQ(d_bias2, d_bias);
}

TEST(Linear, WithoutBiasAddsNoneAndComputesNoBiasGradient) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const LinearShape shape{6, 5, 4};
  auto in = random_normal(6 * 5, 15), weight = random_normal(4 * 5, 16);
  std::vector<double> out(6 * 4, std::nan(""));  // beta = 0: old contents, NaN included, are ignored
  linear_forward(view(in), view(weight), Tensor{}, view(out), shape, workspace, stream);
  const auto expected = naive_gemm(false, true, 6, 4, 5, 1.0, in, weight, 0.0, std::vector<double>(6 * 4));
  for (int i = 0; i < 6 * 4; ++i) EXPECT_NEAR(out[i], expected[i], 1e-12) << "out[" << i << "]";
  std::vector<float> in32 = testing::to_float(in), weight32 = testing::to_float(weight), out32(6 * 4, 7.0f);
  linear_forward(view(in32), view(weight32), Tensor{}, view(out32), shape, workspace, stream);
  for (int i = 0; i < 6 * 4; ++i) EXPECT_NEAR(out32[i], expected[i], 1e-5) << "fp32 out[" << i << "]";

  auto d_out = random_normal(6 * 4, 17);
  const auto d_in_expected = naive_gemm(false, false, 6, 5, 4, 1.0, d_out, weight, 0.0, std::vector<double>(6 * 5));
  const auto d_weight_expected = naive_gemm(true, false, 4, 5, 6, 1.0, d_out, in, 0.0, std::vector<double>(4 * 5));
  std::vector<double> d_in(in.size(), 99.0), d_weight(weight.size(), 99.0);
  linear_backward(view(d_out), view(in), view(weight), view(d_in), view(d_weight), Tensor{}, shape, workspace, stream);
  for (std::size_t i = 0; i < d_in.size(); ++i) EXPECT_NEAR(d_in[i], d_in_expected[i], 1e-12) << "d_in[" << i << "]";
  for (std::size_t i = 0; i < d_weight.size(); ++i) {
    EXPECT_NEAR(d_weight[i], d_weight_expected[i], 1e-12) << "d_weight[" << i << "]";
  }
}

// WeightGrad::accumulate: exactly the old value plus the overwriting call's product, the
// bias and input gradients unchanged.
TEST(Linear, AccumulatedWeightGradientIsTheOldValuePlusTheProduct) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const LinearShape shape{70, 9, 11};  // more rows than one k-block of the blocked GEMM
  auto in = testing::to_float(random_normal(70 * 9, 21)), weight = testing::to_float(random_normal(11 * 9, 22));
  auto d_out = testing::to_float(random_normal(70 * 11, 23)), old = testing::to_float(random_normal(11 * 9, 24));
  std::vector<float> d_in(70 * 9), d_weight(11 * 9), d_bias(11);
  linear_backward(view(d_out), view(in), view(weight), view(d_in), view(d_weight), view(d_bias), shape, workspace,
                  stream);
  std::vector<float> d_in2(70 * 9), accumulated = old, d_bias2(11);
  linear_backward(view(d_out), view(in), view(weight), view(d_in2), view(accumulated), view(d_bias2), shape, workspace,
                  stream, WeightGrad::accumulate);
  for (std::size_t i = 0; i < accumulated.size(); ++i) ASSERT_EQ(accumulated[i], old[i] + d_weight[i]) << i;
  EXPECT_EQ(d_in2, d_in);
  EXPECT_EQ(d_bias2, d_bias);
}

// Adding to a weight gradient forms the product in the workspace first: a workspace without
// room for it is refused before anything is written, one with exactly the room is enough, and
// writing (WeightGrad::overwrite) needs none.
TEST(Linear, AddingToAWeightGradientTakesTheWorkspacesProductScratch) {
  Stream stream;
  const LinearShape shape{70, 9, 11};
  auto in = testing::to_float(random_normal(70 * 9, 41)), weight = testing::to_float(random_normal(11 * 9, 42));
  auto d_out = testing::to_float(random_normal(70 * 11, 43)), old = testing::to_float(random_normal(11 * 9, 44));
  kernels::WorkspaceNeeds needs;
  needs.matmul = true;
  needs.weight_grad_elements = 11 * 9 - 1;
  kernels::Workspace too_small(stream, needs);
  std::vector<float> d_weight = old;
  try {
    linear_backward(view(d_out), view(in), view(weight), Tensor{}, view(d_weight), Tensor{}, shape, too_small, stream,
                    WeightGrad::accumulate);
    ADD_FAILURE() << "a workspace without room for the product was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WorkspaceNeeds::weight_grad_elements of at least 99"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(d_weight, old);

  std::vector<float> written(11 * 9);
  linear_backward(view(d_out), view(in), view(weight), Tensor{}, view(written), Tensor{}, shape, too_small, stream);
  needs.weight_grad_elements = 11 * 9;
  kernels::Workspace exact(stream, needs);
  linear_backward(view(d_out), view(in), view(weight), Tensor{}, view(d_weight), Tensor{}, shape, exact, stream,
                  WeightGrad::accumulate);
  for (std::size_t i = 0; i < d_weight.size(); ++i) ASSERT_EQ(d_weight[i], old[i] + written[i]) << i;
}

// The data gradient and the parameter gradients as two calls (an empty d_weight skips the
// GEMM that reads `in`, an empty d_in the other): each bitwise what one call gives, and a
// skipped result's memory untouched. A bias gradient without the weight gradient is refused.
TEST(Linear, DataAndParameterGradientsAsSeparateCalls) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const LinearShape shape{70, 9, 11};
  auto in = testing::to_float(random_normal(70 * 9, 31)), weight = testing::to_float(random_normal(11 * 9, 32));
  auto d_out = testing::to_float(random_normal(70 * 11, 33)), old = testing::to_float(random_normal(11 * 9, 34));
  std::vector<float> d_in(70 * 9), d_weight = old, d_bias(11);
  linear_backward(view(d_out), view(in), view(weight), view(d_in), view(d_weight), view(d_bias), shape, workspace,
                  stream, WeightGrad::accumulate);

  std::vector<float> d_in2(70 * 9);
  linear_backward(view(d_out), Tensor{}, view(weight), view(d_in2), Tensor{}, Tensor{}, shape, workspace, stream);
  EXPECT_EQ(d_in2, d_in);
  std::vector<float> d_weight2 = old, d_bias2(11), d_in3(70 * 9, 5.0f);
  linear_backward(view(d_out), view(in), view(weight), Tensor{}, view(d_weight2), view(d_bias2), shape, workspace,
                  stream, WeightGrad::accumulate);
  EXPECT_EQ(d_weight2, d_weight);
  EXPECT_EQ(d_bias2, d_bias);
  EXPECT_THROW(linear_backward(view(d_out), view(in), view(weight), view(d_in3), Tensor{}, view(d_bias2), shape,
                               workspace, stream),
               Error);
  EXPECT_EQ(d_in3, std::vector<float>(70 * 9, 5.0f));
}

}  // namespace
}  // namespace adamant::kernels
