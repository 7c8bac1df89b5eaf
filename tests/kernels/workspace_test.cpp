// kernels::Workspace (kernels/workspace.h): the kernels that keep state between calls
// refuse a workspace made without what they need, on the CPU as on a GPU, so that a run
// which sizes its workspace wrongly fails in CPU tests too; with it they compute.
#include "adamant/kernels/workspace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/reduce.h"
#include "model_kernels_test_util.h"

namespace adamant::kernels {
namespace {

using testing::view;

template <typename Call>
void expect_refused(Call&& call, const std::string& expected) {
  try {
    call();
    FAIL() << "accepted a workspace without " << expected;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
}

TEST(Workspace, MatrixProductsNeedItsMatmulPart) {
  const Stream stream;
  std::vector<double> in{1, 2, 3, 4, 5, 6}, weight{1, 0, -1, 0.5, 0.5, 0.5}, bias{0.25, -1}, out(4, 9.0);
  Workspace without(stream, {});
  expect_refused(
      [&] {
        linear_forward(view(in), view(weight), view(bias), view(out), {2, 3, 2}, without, stream);
      },
      "WorkspaceNeeds::matmul");
  Workspace with(stream, WorkspaceNeeds{.matmul = true});
  linear_forward(view(in), view(weight), view(bias), view(out), {2, 3, 2}, with, stream);
  // out = in weight^T + bias, row by row: (1 - 3, 3) and (4 - 6, 7.5), plus the bias.
  EXPECT_EQ(out, (std::vector<double>{-1.75, 2.0, -1.75, 6.5}));
}

TEST(Workspace, LayernormBackwardNeedsRoomForItsRowsAndColumns) {
  const Stream stream;
  const RowsShape shape{3, 4};
  std::vector<double> d_out(12, 1.0), x{1, 2, 3, 4, 0, 0, 1, 1, 2, 2, 2, 5}, weight(4, 1.0), mean(3), rstd(3),
      bias(4, 0.0), out(12), d_x(12, 0.0), d_weight(4), d_bias(4);
  layernorm_forward(view(x), view(weight), view(bias), 1e-5, view(out), view(mean), view(rstd), shape, stream);
  auto backward = [&](Workspace& workspace) {
    layernorm_backward(view(d_out), view(x), view(weight), view(mean), view(rstd), view(d_x), view(d_weight),
                       view(d_bias), shape, workspace, stream);
  };
  Workspace too_few_rows(stream, WorkspaceNeeds{.layernorm_rows = 2, .layernorm_cols = 4});
  expect_refused([&] { backward(too_few_rows); }, "layernorm_rows and layernorm_cols");
  Workspace too_few_cols(stream, WorkspaceNeeds{.layernorm_rows = 3, .layernorm_cols = 3});
  expect_refused([&] { backward(too_few_cols); }, "made for at most 3 x 3");
  Workspace room(stream, WorkspaceNeeds{.layernorm_rows = 3, .layernorm_cols = 4});
  backward(room);
  EXPECT_EQ(d_bias, (std::vector<double>{3, 3, 3, 3}));  // d_bias = column sums of d_out
}

TEST(Workspace, SquaredNormNeedsItsPartialSums) {
  const Stream stream;
  std::vector<float> x{3, 4, 12};
  std::vector<std::int64_t> segments{0, 3, 0};
  std::vector<double> out{0.0};
  Workspace without(stream, WorkspaceNeeds{.matmul = true});
  expect_refused([&] { squared_norm(view(x), view(segments), view(out), false, without, stream); },
                 "WorkspaceNeeds::squared_norm");
  Workspace with(stream, WorkspaceNeeds{.squared_norm = true});
  squared_norm(view(x), view(segments), view(out), false, with, stream);
  EXPECT_EQ(out[0], 169.0);
}

TEST(Workspace, NegativeLayernormNeedsAreRefused) {
  const Stream stream;
  expect_refused([&] { Workspace(stream, WorkspaceNeeds{.layernorm_rows = -1, .layernorm_cols = 8}); },
                 "must not be negative");
}

}  // namespace
}  // namespace adamant::kernels
