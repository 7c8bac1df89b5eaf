#include "adamant/kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model_kernels_test_util.h"
#include "workspace_test_util.h"

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
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const ClassifierShape shape{7, 5, 13};
  auto x = random_normal(7 * 5, 2), embedding = random_normal(13 * 5, 3);
  std::vector<std::int32_t> targets{0, 12, 3, 3, 7, 1, 9};
  std::vector<double> scratch(3 * 13);  // three rows per chunk: chunks of 3, 3, 1
  std::vector<double> losses(7);
  const double scale = 0.25;
  auto loss = [&] {
    fused_classifier(view(x), view(embedding), view(targets), view(losses), view(scratch), 0, Tensor{}, Tensor{}, false,
                     shape, workspace, stream);
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
                   view(d_embedding), true, shape, workspace, stream);
  for (double& v : d_embedding) v -= 1.5;  // accumulated onto the old value
  testing::expect_gradient(x, d_x, loss, "d_x");
  testing::expect_gradient(embedding, d_embedding, loss, "d_embedding");
  // Overwrite mode, and a single chunk, give the same gradient.
  std::vector<double> big_scratch(7 * 13), d_x2(35), d_embedding2(65, 123.0);
  fused_classifier(view(x), view(embedding), view(targets), view(losses), view(big_scratch), scale, view(d_x2),
                   view(d_embedding2), false, shape, workspace, stream);
  for (int i = 0; i < 35; ++i) EXPECT_NEAR(d_x2[i], d_x[i], 1e-14);
  for (int i = 0; i < 65; ++i) EXPECT_NEAR(d_embedding2[i], d_embedding[i], 1e-14);
}

// The vocabulary-parallel classifier over the slices [starts[s], starts[s + 1]) of the
// embedding, run as the ranks of a tensor-parallel group would (the test gathers the
// stats and sums the d_x parts), against fused_classifier over the whole vocabulary.
template <typename T>
void check_vocab_parallel(const std::vector<std::int64_t>& starts, bool accumulate, double tolerance) {
  Stream stream;
  kernels::Workspace workspace(stream, testing::all_workspace_needs());
  const std::int64_t rows = 7, C = 5, vocab = starts.back();
  const int tp = static_cast<int>(starts.size()) - 1;
  const double scale = 0.25;
  const auto x64 = random_normal(rows * C, 2), embedding64 = random_normal(vocab * C, 3, 2.0);
  std::vector<T> x(x64.begin(), x64.end()), embedding(embedding64.begin(), embedding64.end());
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>((r * 5 + 3) % vocab);
  targets[0] = 0;  // the ends of the vocabulary and the first row of every slice
  targets[1] = static_cast<std::int32_t>(vocab - 1);
  for (int s = 1; s < tp && s + 1 < rows; ++s) targets[s + 1] = static_cast<std::int32_t>(starts[s]);
  const T old_d_embedding = 1.5;

  // The reference, in one piece.
  std::vector<T> scratch(vocab), losses(rows), d_x(rows * C), d_embedding(vocab * C, old_d_embedding);
  fused_classifier(view(x), view(embedding), view(targets), view(losses), view(scratch), scale, view(d_x),
                   view(d_embedding), accumulate, {rows, C, vocab}, workspace, stream);

  std::vector<T> gathered;
  auto slice_of = [&](const std::vector<T>& table, int s) {
    return std::vector<T>(table.begin() + starts[s] * C, table.begin() + starts[s + 1] * C);
  };
  for (int s = 0; s < tp; ++s) {
    const VocabParallelShape shape{rows, C, starts[s + 1] - starts[s], starts[s]};
    auto slice = slice_of(embedding, s);
    std::vector<T> slice_scratch(3 * shape.vocab + 1);  // chunks of 3, 3, 1 rows
    std::vector<T> stats(2 * rows, std::nan(""));
    vocab_parallel_classifier_stats(view(x), view(slice), view(targets), view(stats), view(slice_scratch), shape,
                                    workspace, stream);
    gathered.insert(gathered.end(), stats.begin(), stats.end());
  }
  std::vector<T> parallel_losses(rows), lse(rows);
  vocab_parallel_combine(view(gathered), tp, rows, view(parallel_losses), view(lse), stream);
  for (std::int64_t r = 0; r < rows; ++r) {
    EXPECT_NEAR(parallel_losses[r], losses[r], tolerance * std::max(1.0, std::abs(double(losses[r])))) << "row " << r;
  }

  std::vector<T> summed_d_x(rows * C, 0), parallel_d_embedding;
  for (int s = 0; s < tp; ++s) {
    const VocabParallelShape shape{rows, C, starts[s + 1] - starts[s], starts[s]};
    auto slice = slice_of(embedding, s);
    std::vector<T> slice_scratch(2 * shape.vocab);  // chunks of 2 rows
    std::vector<T> part_d_x(rows * C, std::nan("")), slice_d_embedding(shape.vocab * C, old_d_embedding);
    if (!accumulate) std::fill(slice_d_embedding.begin(), slice_d_embedding.end(), std::nan(""));
    vocab_parallel_classifier_backward(view(x), view(slice), view(targets), view(lse), scale, view(slice_scratch),
                                       view(part_d_x), view(slice_d_embedding), accumulate, shape, workspace, stream);
    for (std::size_t i = 0; i < part_d_x.size(); ++i) summed_d_x[i] += part_d_x[i];
    parallel_d_embedding.insert(parallel_d_embedding.end(), slice_d_embedding.begin(), slice_d_embedding.end());
  }
  for (std::size_t i = 0; i < d_x.size(); ++i) {
    EXPECT_NEAR(summed_d_x[i], d_x[i], tolerance * std::max(1e-2, std::abs(double(d_x[i])))) << "d_x[" << i << "]";
  }
  ASSERT_EQ(parallel_d_embedding.size(), d_embedding.size());
  for (std::size_t i = 0; i < d_embedding.size(); ++i) {
    EXPECT_NEAR(parallel_d_embedding[i], d_embedding[i], tolerance * std::max(1e-2, std::abs(double(d_embedding[i]))))
        << "d_embedding[" << i << "]";
  }
}

TEST(VocabParallelClassifier, SlicesCombineToTheWholeVocabulary) {
  for (const bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulating d_embedding" : "overwriting d_embedding");
    check_vocab_parallel<double>({0, 13}, accumulate, 1e-12);        // T = 1
    check_vocab_parallel<double>({0, 6, 12}, accumulate, 1e-12);     // T = 2, even
    check_vocab_parallel<double>({0, 7, 13}, accumulate, 1e-12);     // T = 2, uneven
    check_vocab_parallel<double>({0, 4, 8, 12}, accumulate, 1e-12);  // T = 3, even
    check_vocab_parallel<double>({0, 5, 9, 13}, accumulate, 1e-12);  // T = 3, uneven
    check_vocab_parallel<double>({0, 1, 2, 13}, accumulate, 1e-12);  // slices of one row
    check_vocab_parallel<float>({0, 5, 9, 13}, accumulate, 2e-5);    // fp32: the fast exp
  }
}

TEST(VocabParallelClassifier, CombineIsTheLogSumExpOfTheSlices) {
  Stream stream;
  // Two rows, three ranks: gathered[t] = {lse_t(row 0), lse_t(row 1), target_t(row 0), target_t(row 1)}.
  std::vector<double> gathered{1.0, -2.0, 0.5, 0.0, 3.0, 700.0, 0.0, 0.0, -1.0, 699.0, 0.0, 4.0};
  std::vector<double> losses(2), lse(2);
  vocab_parallel_combine(view(gathered), 3, 2, view(losses), view(lse), stream);
  const double lse0 = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(-1.0));
  const double lse1 = 700.0 + std::log(std::exp(-702.0) + 1.0 + std::exp(-1.0));  // no overflow at 700
  EXPECT_NEAR(lse[0], lse0, 1e-14);
  EXPECT_NEAR(lse[1], lse1, 1e-12);
  EXPECT_NEAR(losses[0], lse0 - 0.5, 1e-14);
  EXPECT_NEAR(losses[1], lse1 - 4.0, 1e-12);
}

}  // namespace
}  // namespace adamant::kernels
