// Tensor and sequence parallelism under mpirun: a model split over a tensor-parallel group
// holds slices of the whole model's weights, and computes the whole model's loss and, slice
// by slice, its gradients (fp64, two micro-batches, hidden dropout on), checked against the
// whole model computed on each rank alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "adamant/comm/process_grid.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/param_layout.h"
#include "model/model_test_util.h"

namespace adamant::model {
namespace {

GptConfig split_config(int tp, bool sequence_parallel) {
  GptConfig config = testing::tiny_config();  // vocab 60 -> 64 for tp 1, 2 and 4 alike
  config.hidden_size = 32;
  config.num_attention_heads = 4;
  config.ffn_hidden_size = 64;
  config.hidden_dropout = 0.1f;
  config.tensor_parallel_size = tp;
  config.sequence_parallel = sequence_parallel;
  return config;
}

// The whole parameter's values at this rank's slice.
std::vector<double> slice_of(const GptConfig& config, const ParamSpec& spec, int tp_rank, const ParamSpec& whole_spec,
                             const Tensor& whole_flat) {
  std::vector<double> out(spec.numel);
  gather_slice(config, spec, tp_rank, whole_flat.ptr<double>() + whole_spec.offset, out.data(), sizeof(double));
  return out;
}

void expect_matches_whole_model(int tp, bool sequence_parallel) {
  comm::MpiCommunicator world(MPI_COMM_WORLD);
  if (world.size() % tp != 0) GTEST_SKIP() << "the world size is not a multiple of " << tp;
  SCOPED_TRACE("tp " + std::to_string(tp) + (sequence_parallel ? ", sequence parallel" : ""));
  comm::ProcessGrid grid(world, tp);
  const auto group = grid.make_tensor_parallel_communicator(Device::cpu());
  const GptConfig config = split_config(tp, sequence_parallel);
  GptConfig whole_config = split_config(1, false);
  ASSERT_EQ(whole_config.padded_vocab_size(), config.padded_vocab_size());

  constexpr int kMicroBatch = 2;
  GptModel split(config, DType::f64, kMicroBatch, Device::cpu(), 7, 0, group.get());
  GptModel whole(whole_config, DType::f64, kMicroBatch, Device::cpu(), 7);
  const ParamList& params = split.params();
  const ParamList& whole_params = whole.params();
  ASSERT_EQ(params.size(), whole_params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_EQ(params[i].name, whole_params[i].name);
    ASSERT_EQ(whole_shape(config, params[i]), whole_params[i].shape) << params[i].name;
    const std::vector<double> expected = slice_of(config, params[i], grid.tp_rank(), whole_params[i], whole.weights());
    const auto got = split.weights().slice(params[i].offset, params[i].numel).span<double>();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()))
        << params[i].name << ": not the whole model's slice";
  }

  // Every tensor-parallel rank of a data-parallel rank sees the same samples. The split model
  // starts as a training step does (NaN in its buffer, discarded): its first backward writes the
  // gradients (the sequence-parallel layernorms' summed over the group in place), the second adds.
  const auto batch = testing::random_batch(config, 2 * kMicroBatch, 100 + static_cast<std::uint32_t>(grid.dp_rank()));
  testing::poison_and_discard_grads(split);
  for (int m = 0; m < 2; ++m) {
    const MicroBatch micro = batch.view(40 + 2 * m, m * kMicroBatch, kMicroBatch);
    const double split_loss = split.forward_backward(micro, 3.0f);
    const double whole_loss = whole.forward_backward(micro, 3.0f);
    EXPECT_NEAR(split_loss, whole_loss, 1e-12 * std::abs(whole_loss));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> expected = slice_of(config, params[i], grid.tp_rank(), whole_params[i], whole.grads());
    const auto got = split.grads().slice(params[i].offset, params[i].numel).span<double>();
    double scale = 0;
    for (const double value : expected) scale = std::max(scale, std::abs(value));
    EXPECT_GT(scale, 0.0) << params[i].name << ": no gradient reached it";
    // NaN where the split model left a gradient unwritten, which fails the check
    EXPECT_LE(testing::max_abs_difference(got, expected), 1e-10 * scale) << params[i].name;
  }
  const MicroBatch validation = batch.view(0, 0, kMicroBatch);
  const double whole_loss = whole.forward_loss(validation);
  EXPECT_NEAR(split.forward_loss(validation), whole_loss, 1e-12 * std::abs(whole_loss));
}

TEST(TensorParallel, TwoRanksComputeTheWholeModel) { expect_matches_whole_model(2, false); }
TEST(TensorParallel, TwoRanksWithSequenceParallelism) { expect_matches_whole_model(2, true); }
TEST(TensorParallel, FourRanksComputeTheWholeModel) { expect_matches_whole_model(4, false); }
TEST(TensorParallel, FourRanksWithSequenceParallelism) { expect_matches_whole_model(4, true); }

TEST(TensorParallel, ModelWithoutItsGroupIsRefused) {
  const GptConfig config = split_config(2, false);
  try {
    GptModel model(config, DType::f64, 1, Device::cpu(), 7);
    FAIL() << "a tensor-parallel model without its group was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor-parallel group"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adamant::model
