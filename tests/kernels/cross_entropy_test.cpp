#include "adamant/kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using testing::random_normal;
using testing::view;

// -log_softmax(row)[target], directly in long double.
double direct_cross_entropy(const double* row, int vocab, int target) {
  long double total = 0;
  for (int v = 0; v < vocab; ++v) total += std::exp(static_cast<long double>(row[v]));
  return static_cast<double>(std::log(total) - row[target]);
}

TEST(SoftmaxCrossEntropy, MatchesLogSoftmaxAndItsGradient) {
  Stream stream;
  const int rows = 4, vocab = 11;
  const auto logits = random_normal(rows * vocab, 1, 3.0);
  std::vector<std::int32_t> targets{0, 10, 5, 5};
  auto work = logits;
  std::vector<double> losses(rows);
  softmax_cross_entropy(view(work), view(targets), view(losses), rows, vocab, true, 0.5, stream);
  for (int r = 0; r < rows; ++r) {
    EXPECT_NEAR(losses[r], direct_cross_entropy(&logits[r * vocab], vocab, targets[r]), 1e-13);
  }
  // Gradient of 0.5 * sum of losses.
  auto x = logits;
  auto loss = [&] {
    double sum = 0;
    for (int r = 0; r < rows; ++r) sum += 0.5 * direct_cross_entropy(&x[r * vocab], vocab, targets[r]);
    return sum;
  };
  testing::expect_gradient(x, work, loss, "dlogits");
  // Large logits do not overflow.
  std::vector<float> big{1000.0f, 0.0f, -1000.0f};
  std::vector<std::int32_t> t{1};
  std::vector<float> l(1);
  softmax_cross_entropy(view(big), view(t), view(l), 1, 3, false, 1.0, stream);
  EXPECT_NEAR(l[0], 1000.0f, 1e-3f);
}

TEST(SoftmaxCrossEntropy, Fp32MatchesFp64OverAWideRange) {
  // The fp32 path has its own vectorised exp; it must agree with the library's to fp32 precision.
  Stream stream;
  const int rows = 6, vocab = 1003;  // not a multiple of the lane count
  const auto logits = random_normal(rows * vocab, 8, 12.0);
  std::vector<std::int32_t> targets{0, 1002, 17, 500, 999, 3};
  auto exact = logits;
  auto approx = testing::to_float(logits);
  std::vector<double> losses(rows);
  std::vector<float> losses32(rows);
  softmax_cross_entropy(view(exact), view(targets), view(losses), rows, vocab, true, 1.0, stream);
  softmax_cross_entropy(view(approx), view(targets), view(losses32), rows, vocab, true, 1.0, stream);
  for (int r = 0; r < rows; ++r) EXPECT_NEAR(losses32[r], losses[r], 2e-5 * std::max(1.0, losses[r]));
  for (std::size_t i = 0; i < exact.size(); ++i)
    ASSERT_NEAR(approx[i], exact[i], 1e-6 + 2e-6 * std::abs(exact[i])) << i;
}

TEST(FusedClassifier, ChunkedMatchesDirectAndFiniteDifferences) {
  Stream stream;
  const ClassifierShape shape{7, 5, 13};
  auto x = random_normal(7 * 5, 2), embedding = random_normal(13 * 5, 3);
  std::vector<std::int32_t> targets{0, 12, 3, 3, 7, 1, 9};
  std::vector<double> scratch(3 * 13);  // three rows per chunk: chunks of 3, 3, 1
  std::vector<double> losses(7);
  const double scale = 0.25;
  auto loss = [&] {
    fused_classifier(view(x), view(embedding), view(targets), view(losses), view(scratch), 0, Tensor{}, Tensor{}, false,
                     shape, stream);
    double sum = 0;
    for (double v : losses) sum += scale * v;
    return sum;
  };
  loss();
  for (int r = 0; r < 7; ++r) {  // against logits formed directly
    std::vector<double> row(13);
    for (int v = 0; v < 13; ++v) {
      for (int c = 0; c < 5; ++c) row[v] += x[r * 5 + c] * embedding[v * 5 + c];
    }
    EXPECT_NEAR(losses[r], direct_cross_entropy(row.data(), 13, targets[r]), 1e-12);
  }
  std::vector<double> d_x(35, 99.0), d_embedding(65, 1.5);
  fused_classifier(view(x), view(embedding), view(targets), view(losses), view(scratch), scale, view(d_x),
                   view(d_embedding), true, shape, stream);
  for (double& v : d_embedding) v -= 1.5;  // accumulated onto the old value
  testing::expect_gradient(x, d_x, loss, "d_x");
  testing::expect_gradient(embedding, d_embedding, loss, "d_embedding");
  // Overwrite mode, and a single chunk, give the same gradient.
  std::vector<double> big_scratch(7 * 13), d_x2(35), d_embedding2(65, 123.0);
  fused_classifier(view(x), view(embedding), view(targets), view(losses), view(big_scratch), scale, view(d_x2),
                   view(d_embedding2), false, shape, stream);
  for (int i = 0; i < 35; ++i) EXPECT_NEAR(d_x2[i], d_x[i], 1e-14);
  for (int i = 0; i < 65; ++i) EXPECT_NEAR(d_embedding2[i], d_embedding[i], 1e-14);
}

}  // namespace
}  // namespace adamant::kernels
