// LossReadback on the CPU: the sum of each pass's mean loss, added in the order the passes were
// queued, whether or not passes were folded early for lack of room; checked against the sums
// written out here and against closed forms.
#include "adamant/model/loss_readback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "adamant/core/error.h"

namespace adamant::model {
namespace {

using ::testing::HasSubstr;

template <typename T>
Tensor host_tensor(std::vector<T>& values, DType dtype) {
  return Tensor::flat(values.data(), dtype, Device::cpu(), values.size());
}

// The mean of 0, 1, ..., n-1 scaled by `scale`: scale (n - 1) / 2, exact for these sizes.
std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i);
  return v;
}

TEST(LossReadback, NothingQueuedSumsToZero) {
  LossReadback reads(8, DType::f32, Device::cpu());
  EXPECT_EQ(reads.take_sum_of_means(), 0.0);
  EXPECT_EQ(reads.untaken(), 0);
}

TEST(LossReadback, SumsEachPassMeanInOrderAcrossFolds) {
  // Room for two passes, five queued: the first four are folded in two waits.
  LossReadback reads(16, DType::f32, Device::cpu(), 2);
  const std::vector<std::size_t> lengths{16, 3, 7, 16, 1};
  const std::vector<float> scales{0.5f, 3.0f, -1.25f, 0.1f, 9.0f};
  double expected = 0;
  for (std::size_t p = 0; p < lengths.size(); ++p) {
    std::vector<float> losses = ramp(lengths[p], scales[p]);
    reads.queue(host_tensor(losses, DType::f32), Stream(Device::cpu()));
    double sum = 0;
    for (const float v : losses) sum += v;
    expected += sum / static_cast<double>(losses.size());
    losses.assign(losses.size(), 1e30f);  // the pass's buffer is reused once queued
  }
  EXPECT_EQ(reads.untaken(), 5);
  const double got = reads.take_sum_of_means();
  EXPECT_EQ(got, expected);  // the same additions in the same order
  double closed_form = 0;
  for (std::size_t p = 0; p < lengths.size(); ++p) closed_form += scales[p] * static_cast<double>(lengths[p] - 1) / 2;
  EXPECT_NEAR(got, closed_form, 1e-6);
  EXPECT_EQ(reads.untaken(), 0);
  EXPECT_EQ(reads.take_sum_of_means(), 0.0);  // a take empties it
}

TEST(LossReadback, ReadsFp64Losses) {
  LossReadback reads(4, DType::f64, Device::cpu(), 1);
  std::vector<double> first{1.0, 2.0, 3.0, 4.0}, second{0.25, 1.0};
  reads.queue(host_tensor(first, DType::f64), Stream(Device::cpu()));
  reads.queue(host_tensor(second, DType::f64), Stream(Device::cpu()));
  EXPECT_EQ(reads.take_sum_of_means(), 2.5 + 0.625);
}

TEST(LossReadback, RejectsPassesItHasNoRoomFor) {
  LossReadback reads(4, DType::f32, Device::cpu());
  std::vector<float> five(5, 1.0f);
  std::vector<double> fp64(2, 1.0);
  try {
    reads.queue(host_tensor(five, DType::f32), Stream(Device::cpu()));
    FAIL() << "5 losses in room for 4";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("5 losses of fp32; it was made for up to 4 of fp32"));
  }
  EXPECT_THROW(reads.queue(host_tensor(fp64, DType::f64), Stream(Device::cpu())), Error);
  EXPECT_THROW(LossReadback(4, DType::bf16, Device::cpu()), Error);
  EXPECT_THROW(LossReadback(4, DType::f32, Device::cpu(), 0), Error);
  EXPECT_EQ(reads.untaken(), 0);
}

}  // namespace
}  // namespace adamant::model
