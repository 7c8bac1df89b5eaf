#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adamant/core/rng.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/residual.h"
#include "adamant/kernels/workspace.h"
#include "model_kernels_test_util.h"
#include "workspace_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

// gelu_forward in fp64 and fp32 against values computed independently in double precision.
void expect_gelu_values(GeluForm form, std::vector<double> x, const std::vector<double>& expected) {
  Stream stream;
  std::vector<double> out(x.size());
  gelu_forward(view(x), view(out), static_cast<std::int64_t>(x.size()), form, stream);
  std::vector<float> x32(x.begin(), x.end()), out32(x.size());
  gelu_forward(view(x32), view(out32), static_cast<std::int64_t>(x.size()), form, stream);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(out[i], expected[i], 1e-14) << "x = " << x[i];
    EXPECT_NEAR(out32[i], expected[i], 1e-6) << "x = " << x[i];
  }
}

TEST(Gelu, KnownValuesOfTheErfForm) {
  // x * Phi(x): Phi(1) = 0.841344746068543, Phi(-1) = 0.158655253931457, Phi(2) = 0.977249868051821.
  expect_gelu_values(GeluForm::exact, {0.0, 1.0, -1.0, 2.0},
                     {0.0, 0.841344746068543, -0.158655253931457, 2 * 0.977249868051821});
}

TEST(Gelu, KnownValuesOfTheTanhForm) {
  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), evaluated in double precision.
  expect_gelu_values(GeluForm::tanh, {0.0, 1.0, -1.0, 2.0, -3.0},
                     {0.0, 0.8411919906082768, -0.15880800939172324, 1.954597694087775, -0.0036373920817729943});
}

TEST(Gelu, BackwardMatchesFiniteDifferencesInBothForms) {
  Stream stream;
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    auto x = random_normal(50, 1, 2.0);
    const auto probe = random_normal(50, 2);
    std::vector<double> out(50);
    auto loss = [&] {
      gelu_forward(view(x), view(out), 50, form, stream);
      return testing::dot(out, probe);
    };
    auto d = probe;  // in place: d_x aliases d_out
    gelu_backward(view(d), view(x), view(d), 50, form, stream);
    testing::expect_gradient(x, d, loss, form == GeluForm::exact ? "gelu" : "gelu tanh");
  }
}

// With an output, the backward also writes the forward's values (bitwise: the same
// arithmetic) and its gradient is unchanged; the output may not alias the gradient.
TEST(Gelu, BackwardRematerializesTheForwardOutput) {
  Stream stream;
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    auto x = random_normal(37, 5, 2.0);
    auto probe = random_normal(37, 6);
    std::vector<double> forward(37), plain(37), rematerialized(37, -1.0);
    gelu_forward(view(x), view(forward), 37, form, stream);
    gelu_backward(view(probe), view(x), view(plain), 37, form, stream);
    auto d = probe;  // in place, as the model runs it
    gelu_backward(view(d), view(x), view(d), 37, form, stream, view(rematerialized));
    EXPECT_EQ(rematerialized, forward);
    EXPECT_EQ(d, plain);
    EXPECT_THROW(gelu_backward(view(d), view(x), view(d), 37, form, stream, view(d)), Error);
  }
}

// With a bias gradient, the backward also sums d_x's columns: against sums made here in
// row order, bitwise (the same additions); ragged rows and a missing workspace are refused.
TEST(Gelu, BackwardSumsTheBiasGradientOfItsRows) {
  Stream stream;
  Workspace workspace(stream, testing::all_workspace_needs());
  const std::int64_t rows = 9, cols = 7;
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    auto x = random_normal(rows * cols, 7, 2.0);
    auto d = random_normal(rows * cols, 8);
    std::vector<double> d_bias(cols, -1.0);
    gelu_backward(view(d), view(x), view(d), rows * cols, form, stream, {}, {view(d_bias), cols, &workspace});
    for (std::int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (std::int64_t i = 0; i < rows; ++i) sum += d[i * cols + j];
      EXPECT_EQ(d_bias[j], sum) << "column " << j;
    }
    EXPECT_THROW(gelu_backward(view(d), view(x), view(d), rows * cols, form, stream, {}, {view(d_bias), 6, &workspace}),
                 Error);
    std::vector<double> wrong_size(cols + 1);
    EXPECT_THROW(
        gelu_backward(view(d), view(x), view(d), rows * cols, form, stream, {}, {view(wrong_size), cols, &workspace}),
        Error);
    EXPECT_THROW(gelu_backward(view(d), view(x), view(d), rows * cols, form, stream, {}, {view(d_bias), cols, nullptr}),
                 Error);
  }
}

// With a bias gradient, dropout also sums its output's columns, in row order (bitwise).
TEST(Dropout, SumsTheBiasGradientOfItsOutput) {
  Stream stream;
  Workspace workspace(stream, testing::all_workspace_needs());
  const std::int64_t rows = 12, cols = 8;
  auto in = random_normal(rows * cols, 9);
  std::vector<double> out(in.size()), plain(in.size()), d_bias(cols, -1.0);
  DropoutArgs args;
  args.probability = 0.25f;
  args.seed = 17;
  dropout(view(in), view(plain), rows * cols, 4 * cols, args, stream);
  dropout(view(in), view(out), rows * cols, 4 * cols, args, stream, {view(d_bias), cols, &workspace});
  EXPECT_EQ(out, plain);
  for (std::int64_t j = 0; j < cols; ++j) {
    double sum = 0;
    for (std::int64_t i = 0; i < rows; ++i) sum += out[i * cols + j];
    EXPECT_EQ(d_bias[j], sum) << "column " << j;
  }
  EXPECT_THROW(dropout(view(in), view(out), rows * cols, 4 * cols, args, stream, {view(d_bias), 7, &workspace}), Error);
}

TEST(Dropout, DropsAboutPAndScalesTheRest) {
  Stream stream;
  const int batch = 4, numel = 25003;  // not a multiple of four
  std::vector<float> x(batch * numel, 2.0f), y(x.size());
  const DropoutArgs args{0.25f, 7, 1000, 3};
  dropout(view(x), view(y), batch * numel, numel, args, stream);
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
  dropout(view(x), view(x), batch * numel, numel, args, stream);
  EXPECT_EQ(x, y);
}

TEST(Dropout, MaskDependsOnlyOnSeedSampleAndSite) {
  Stream stream;
  const int numel = 1001;
  const auto source = testing::to_float(random_normal(3 * numel, 3));
  auto whole = source;
  dropout(view(whole), view(whole), 3 * numel, numel, {0.5f, 11, 40, 2}, stream);
  for (int b = 0; b < 3; ++b) {  // sample 40 + b alone, as the first of its own batch
    std::vector<float> single(source.begin() + b * numel, source.begin() + (b + 1) * numel);
    dropout(view(single), view(single), numel, numel, {0.5f, 11, 40u + b, 2}, stream);
    EXPECT_TRUE(std::equal(single.begin(), single.end(), whole.begin() + b * numel)) << "sample " << b;
  }
  auto other_site = source, other_seed = source;
  dropout(view(other_site), view(other_site), 3 * numel, numel, {0.5f, 11, 40, 3}, stream);
  dropout(view(other_seed), view(other_seed), 3 * numel, numel, {0.5f, 12, 40, 2}, stream);
  EXPECT_NE(other_site, whole);
  EXPECT_NE(other_seed, whole);
}

// A sample offset in memory (what a recorded pass reads) adds to the first sample index.
TEST(Dropout, SampleOffsetInMemoryAddsToTheFirstSampleIndex) {
  Stream stream;
  const std::int64_t sample_numel = 1001, total = 3 * sample_numel;
  const auto source = random_normal(static_cast<std::size_t>(total), 23);
  std::uint64_t offset = 678;
  DropoutArgs split{0.5f, 0xfeedbeefull, 12345, 9};
  split.sample_offset = &offset;
  auto expected = source, actual = source, other = source;
  dropout(view(expected), view(expected), total, sample_numel, {0.5f, 0xfeedbeefull, 12345 + 678, 9}, stream);
  dropout(view(actual), view(actual), total, sample_numel, split, stream);
  EXPECT_EQ(actual, expected);
  offset = 679;  // read at each call
  dropout(view(other), view(other), total, sample_numel, split, stream);
  EXPECT_NE(other, expected);
}

TEST(Dropout, ZeroProbabilityIsIdentity) {
  Stream stream;
  auto x = random_normal(10, 4);
  std::vector<double> y(10);
  dropout(view(x), view(y), 10, 5, {}, stream);
  EXPECT_EQ(x, y);
  EXPECT_THROW(dropout(view(x), view(y), 10, 5, {1.0f, 0, 0, 0}, stream), Error);
}

TEST(Dropout, RefusesSampleIndicesBeyondTheGeneratorsRange) {
  Stream stream;
  std::vector<double> x(10, 1.0), y(10);
  // Two samples of 5: the last one allowed is kMaxDropoutSample - 1.
  DropoutArgs args{0.5f, 7, kMaxDropoutSample - 2, 3};
  EXPECT_NO_THROW(dropout(view(x), view(y), 10, 5, args, stream));
  args.first_sample_index = kMaxDropoutSample - 1;
  EXPECT_THROW(dropout(view(x), view(y), 10, 5, args, stream), Error);
  args.first_sample_index = ~std::uint64_t{0};  // would wrap around in a plain sum
  EXPECT_THROW(dropout(view(x), view(y), 10, 5, args, stream), Error);
  EXPECT_NO_THROW(check_dropout_samples(kMaxDropoutSample, 0, "test"));
  EXPECT_THROW(check_dropout_samples(kMaxDropoutSample, 1, "test"), Error);
  EXPECT_THROW(check_dropout_samples(0, -1, "test"), Error);
}

// Element j of the batch flattened as [samples, sample_numel], straight from the
// generator: sample j / sample_numel, element e = j % sample_numel, word e % 4 of the
// draw at counter e / 4 of that (sample, site) stream.
bool reference_keeps(const DropoutArgs& args, std::int64_t j, std::int64_t sample_numel) {
  const auto sample = static_cast<std::uint64_t>(j / sample_numel);
  const std::int64_t e = j % sample_numel;
  const PhiloxCounter bits = philox_draw(args.seed, static_cast<std::uint64_t>(e / 4),
                                         dropout_stream(args.first_sample_index + sample, args.site));
  return uniform_float(bits[static_cast<std::size_t>(e % 4)]) >= args.probability;
}

struct DropoutShard {
  std::int64_t sample_numel;
  std::int64_t first_element;
  std::int64_t numel;
};

TEST(Dropout, ShardAtAnElementOffsetIsThatSliceOfTheWholeMask) {
  Stream stream;
  const std::int64_t samples = 4;
  // Shards that start inside a sample, straddle one or two sample boundaries, end at
  // the batch's end, are shorter than a sample, or have a length that is not a multiple
  // of 4; samples of a length that is, and is not, a multiple of 4.
  const std::vector<DropoutShard> shards = {{1001, 996, 1000}, {1001, 0, 1001}, {1001, 2000, 2004}, {1001, 1000, 7},
                                            {1001, 3996, 8},   {1024, 1020, 9}, {1024, 512, 2048},  {1024, 3072, 1024},
                                            {6, 4, 13},        {6, 20, 4}};
  for (const DropoutShard& shard : shards) {
    SCOPED_TRACE("sample " + std::to_string(shard.sample_numel) + " shard [" + std::to_string(shard.first_element) +
                 ", +" + std::to_string(shard.numel) + ")");
    const std::int64_t total = samples * shard.sample_numel;
    ASSERT_LE(shard.first_element + shard.numel, total);
    const DropoutArgs args{0.5f, 0xfeedbeefull, 12345, 9};
    const auto source = random_normal(static_cast<std::size_t>(total), 21);
    auto whole = source;
    dropout(view(whole), view(whole), total, shard.sample_numel, args, stream);
    std::vector<double> part(source.begin() + shard.first_element, source.begin() + shard.first_element + shard.numel);
    DropoutArgs shard_args = args;
    shard_args.first_element = static_cast<std::uint64_t>(shard.first_element);
    dropout(view(part), view(part), shard.numel, shard.sample_numel, shard_args, stream);
    for (std::int64_t i = 0; i < shard.numel; ++i) {
      const std::int64_t j = shard.first_element + i;
      ASSERT_EQ(part[i], whole[j]) << "element " << i << " of the shard";
      const double expected = reference_keeps(args, j, shard.sample_numel) ? source[j] * 2.0 : 0.0;
      ASSERT_EQ(part[i], expected) << "element " << i << " of the shard";
    }
  }
}

TEST(Dropout, ShardMustStartAtAMultipleOfFour) {
  Stream stream;
  auto x = random_normal(12, 22);
  DropoutArgs args{0.5f, 1, 0, 0};
  args.first_element = 6;
  EXPECT_THROW(dropout(view(x), view(x), 12, 10, args, stream), Error);
  args.first_element = 8;
  EXPECT_NO_THROW(dropout(view(x), view(x), 12, 10, args, stream));
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
