// Pipeline stages on two GPUs (NCCL send and receive between the stages, the tied embedding summed
// over them) against the whole model on one GPU: the same bf16 run but for the order of a few fp32
// sums (the tied embedding's two gradients, the grad norm's stage sums).
#include <gtest/gtest.h>
#include <mpi.h>

#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

TEST(GpuPipelineTraining, TwoStagesTrainAsTheWholeModelOnOneGpu) {
  const auto dir = shared_temp_dir("gpu-pipeline");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  for (const int chunks : {1, 2}) {
    SCOPED_TRACE(chunks == 1 ? "1F1B" : "interleaved, 2 chunks");
    train::TrainConfig config = tiny_config(prefix, dir / ("pp2-v" + std::to_string(chunks)));
    config.trainer.accelerator = "gpu";
    config.model.num_layers = 4;
    config.model.hidden_size = 128;
    config.model.ffn_hidden_size = 512;
    config.model.num_attention_heads = 2;  // head size 64, as the GPU attention takes
    config.model.seq_length = config.model.max_position_embeddings = 64;
    config.model.hidden_dropout = 0.1f;
    config.optim.gradient_clip_val = 0.5;
    config.data.global_batch_size = 8;
    config.model.pipeline_parallel_size = 2;
    config.model.virtual_pipeline_size = chunks;
    const train::TrainSummary split = train_on_ranks(config, 2);

    train::TrainConfig whole = config;
    whole.model.pipeline_parallel_size = 1;
    whole.model.virtual_pipeline_size = 1;
    whole.exp_manager.exp_dir = dir / ("whole-v" + std::to_string(chunks));
    const train::TrainSummary reference = train_on_ranks(whole, 1);
    if (world_rank() == 0) {
      ASSERT_EQ(split.train_losses.size(), reference.train_losses.size());
      EXPECT_LT(max_relative_difference(split.train_losses, reference.train_losses), 1e-3);
      EXPECT_LT(split.train_losses.back(), split.train_losses.front());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace adamant::testing
