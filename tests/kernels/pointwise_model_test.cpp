#include <gtest/gtest.h>

#include "adamant/kernels/dropout.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/residual.h"
#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

TEST(Gelu, KnownValuesOfTheErfForm) {
  Stream stream;
  // x * Phi(x): Phi(1) = 0.841344746068543, Phi(-1) = 0.158655253931457, Phi(2) = 0.977249868051821.
  std::vector<double> x{0.0, 1.0, -1.0, 2.0}, out(4);
  gelu_forward(view(x), view(out), 4, stream);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_NEAR(out[1], 0.841344746068543, 1e-14);
  EXPECT_NEAR(out[2], -0.158655253931457, 1e-14);
  EXPECT_NEAR(out[3], 2 * 0.977249868051821, 1e-14);
  std::vector<float> x32{1.0f, -1.0f}, out32(2);
  gelu_forward(view(x32), view(out32), 2, stream);
  EXPECT_NEAR(out32[0], 0.841344746f, 1e-6f);
  EXPECT_NEAR(out32[1], -0.158655254f, 1e-6f);
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  Stream stream;
  auto x = random_normal(50, 1, 2.0);
  const auto probe = random_normal(50, 2);
  std::vector<double> out(50);
  auto loss = [&] {
    gelu_forward(view(x), view(out), 50, stream);
    return testing::dot(out, probe);
  };
  auto d = probe;  // in place: d_x aliases d_out
  gelu_backward(view(d), view(x), view(d), 50, stream);
  testing::expect_gradient(x, d, loss, "gelu");
}

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  Stream stream;
  const int batch = 4, numel = 25003;  // not a multiple of four
  std::vector<float> x(batch * numel, 2.0f), y(x.size());
  const DropoutArgs args{0.25f, 7, 1000, 3};
  dropout(view(x), view(y), batch, numel, args, stream);
  int dropped = 0;
  for (const float v : y) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      ASSERT_FLOAT_EQ(v, 2.0f / 0.75f);
    }
  }
  EXPECT_NEAR(dropped / static_cast<double>(y.size()), 0.25, 0.01);
  // In place gives the same result, and it is run-to-run reproducible.
  dropout(view(x), view(x), batch, numel, args, stream);
  EXPECT_EQ(x, y);
}

TEST(Dropout, MaskDependsOnlyOnSeedSampleAndSite) {
  Stream stream;
  const int numel = 1001;
  const auto source = testing::to_float(random_normal(3 * numel, 3));
  auto whole = source;
  dropout(view(whole), view(whole), 3, numel, {0.5f, 11, 40, 2}, stream);
  for (int b = 0; b < 3; ++b) {  // sample 40 + b alone, as the first of its own batch
    std::vector<float> single(source.begin() + b * numel, source.begin() + (b + 1) * numel);
    dropout(view(single), view(single), 1, numel, {0.5f, 11, 40u + b, 2}, stream);
    EXPECT_TRUE(std::equal(single.begin(), single.end(), whole.begin() + b * numel)) << "sample " << b;
  }
  auto other_site = source, other_seed = source;
  dropout(view(other_site), view(other_site), 3, numel, {0.5f, 11, 40, 3}, stream);
  dropout(view(other_seed), view(other_seed), 3, numel, {0.5f, 12, 40, 2}, stream);
  EXPECT_NE(other_site, whole);
  EXPECT_NE(other_seed, whole);
}

TEST(Dropout, ZeroProbabilityIsIdentity) {
  Stream stream;
  auto x = random_normal(10, 4);
  std::vector<double> y(10);
  dropout(view(x), view(y), 2, 5, {}, stream);
  EXPECT_EQ(x, y);
  EXPECT_THROW(dropout(view(x), view(y), 2, 5, {1.0f, 0, 0, 0}, stream), Error);
}

TEST(Residual, AddsElementwise) {
  Stream stream;
  auto a = random_normal(13, 5), b = random_normal(13, 6);
  std::vector<double> out(13);
  residual_add(view(a), view(b), view(out), 13, stream);
  for (int i = 0; i < 13; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
}

}  // namespace
}  // namespace adamant::kernels
