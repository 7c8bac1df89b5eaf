// Tensor parallelism on GPUs (one per rank, NCCL): a model split over 2 GPUs, with and
// without sequence parallelism, against the whole model on each rank's GPU alone. Both
// are bf16 models; the split one also rounds the row-parallel partial sums to bf16
// before adding them over the group, so the bounds are the GPU model tests' (relative
// loss 2e-2, relative L2 error 5e-2 per parameter slice; see gpu_model_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "adamant/comm/process_grid.h"
#include "adamant/core/device.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/param_layout.h"
#include "model/model_test_util.h"

namespace adamant::model {
namespace {

GptConfig split_config(int tp, bool sequence_parallel) {
  GptConfig config = testing::gpu_config();
  config.hidden_dropout = 0.1f;
  config.attention_dropout = 0.0f;
  config.tensor_parallel_size = tp;
  config.sequence_parallel = sequence_parallel;
  // The same padded vocabulary (50432) whole and split: 128 x tp for tp 2.
  config.make_vocab_size_divisible_by = tp == 1 ? 256 : 128;
  return config;
}

std::vector<float> download_grads(GptModel& model) {
  model.stream().synchronize();
  const Tensor grads = model.grads();
  std::vector<float> out(grads.numel());
  copy_bytes(out.data(), Device::cpu(), grads.data, grads.device, grads.bytes());
  return out;
}

void expect_split_matches_whole(bool sequence_parallel) {
  comm::MpiCommunicator world(MPI_COMM_WORLD);
  if (!cuda_available() || cuda_device_count() < 2 || world.size() != 2) {
    GTEST_SKIP() << "needs 2 ranks with a GPU each";
  }
  SCOPED_TRACE(sequence_parallel ? "sequence parallel" : "tensor parallel");
  const Device gpu = Device::cuda(world.rank());
  comm::ProcessGrid grid(world, 2);
  const auto group = grid.make_tensor_parallel_communicator(gpu);
  const GptConfig config = split_config(2, sequence_parallel);
  GptModel split(config, DType::bf16, 2, gpu, 11, 0, group.get());
  GptModel whole(split_config(1, false), DType::bf16, 2, gpu, 11);
  ASSERT_EQ(whole.config().padded_vocab_size(), config.padded_vocab_size());

  const auto batch = testing::random_batch(config, 4, 5);  // the same on both ranks
  double split_loss = 0, whole_loss = 0;
  testing::poison_and_discard_grads(split);  // as a step starts: its first backward writes every gradient
  whole.zero_grads();
  for (int m = 0; m < 2; ++m) {
    split_loss += split.forward_backward(batch.view(8 + 2 * m, 2 * m, 2), 1.0f);
    whole_loss += whole.forward_backward(batch.view(8 + 2 * m, 2 * m, 2), 1.0f);
  }
  EXPECT_NEAR(split_loss, whole_loss, 2e-2 * whole_loss);
  const std::vector<float> split_grads = download_grads(split), whole_grads = download_grads(whole);
  const ParamList& params = split.params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamSpec& p = params[i];
    std::vector<float> expected(p.numel);
    gather_slice(config, p, grid.tp_rank(), whole_grads.data() + whole.params()[i].offset, expected.data(),
                 sizeof(float));
    double error = 0, scale = 0;
    for (std::size_t k = 0; k < p.numel; ++k) {
      const double d = static_cast<double>(split_grads[p.offset + k]) - expected[k];
      error += d * d;
      scale += static_cast<double>(expected[k]) * expected[k];
    }
    ASSERT_GT(scale, 0.0) << p.name;
    EXPECT_LE(std::sqrt(error / scale), 5e-2) << p.name << " on tensor-parallel rank " << grid.tp_rank();
  }
}

TEST(GpuTensorParallel, TwoGpusComputeTheWholeModel) { expect_split_matches_whole(false); }
TEST(GpuTensorParallel, TwoGpusWithSequenceParallelism) { expect_split_matches_whole(true); }

}  // namespace
}  // namespace adamant::model
