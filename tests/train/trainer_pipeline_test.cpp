// Pipeline parallelism end to end under mpirun: stages (1F1B and interleaved), combined with data
// and tensor parallelism, train as the whole model does on one rank, and their checkpoints resume
// at another number of stages.
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <string>

#include "adamant/core/error.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

struct Layout {
  int tp = 1, pp = 1, chunks = 1;
  std::string optimizer = "distributed_fused_adam";
  int ranks() const { return tp * pp; }  // times the data-parallel size
  std::string name() const {
    return "tp" + std::to_string(tp) + "-pp" + std::to_string(pp) + "-v" + std::to_string(chunks) + "-" + optimizer;
  }
};

// Eight layers, hidden dropout on (the masks must follow the whole model's layers), clipping on (the norm is
// summed over the stages with the tied word embedding counted once), a global batch of 8: 4 or 8
// micro-batches per data-parallel rank and step.
train::TrainConfig pipeline_config(const std::filesystem::path& prefix, const std::filesystem::path& run_dir,
                                   const Layout& layout) {
  train::TrainConfig config = tiny_config(prefix, run_dir);
  config.model.num_layers = 8;
  config.model.hidden_dropout = 0.1f;
  // Attention dropout stays off: each tensor-parallel rank's heads draw from a site of their own, so
  // with tp it is not the whole model's (the stages' attention masks are checked in model_tests).
  config.model.attention_dropout = 0.0f;
  config.optim.gradient_clip_val = 0.5;
  config.model.tensor_parallel_size = layout.tp;
  config.model.sequence_parallel = layout.tp > 1;
  config.model.pipeline_parallel_size = layout.pp;
  config.model.virtual_pipeline_size = layout.chunks;
  config.optim.name = layout.optimizer;
  config.model.make_vocab_size_divisible_by = 256 / layout.tp;  // the same padded vocabulary at every tp
  config.data.global_batch_size = 8;
  return config;
}

train::TrainConfig one_rank(train::TrainConfig config) {
  config.model.tensor_parallel_size = 1;
  config.model.sequence_parallel = false;
  config.model.pipeline_parallel_size = 1;
  config.model.virtual_pipeline_size = 1;
  config.model.make_vocab_size_divisible_by = 256;
  return config;
}

TEST(PipelineTraining, EveryLayoutTrainsAsTheWholeModelOnOneRank) {
  const int ranks = world_size();
  if (ranks < 2) GTEST_SKIP() << "needs 2 ranks or more";
  std::vector<Layout> layouts;
  if (ranks == 2) layouts = {{1, 2, 1}, {1, 2, 2}, {1, 2, 1, "fused_adam"}};
  if (ranks == 4) layouts = {{1, 4, 1}, {1, 4, 2}, {1, 2, 1}, {2, 2, 1}, {1, 2, 2}};
  if (ranks == 8) layouts = {{2, 2, 1}};
  const auto dir = shared_temp_dir("pipeline-layouts");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  const train::TrainConfig reference_config = pipeline_config(prefix, dir / "whole", {});
  train::TrainConfig alone = one_rank(reference_config);
  alone.exp_manager.exp_dir = dir / ("whole-" + std::to_string(world_rank()));
  train::TrainOptions self;
  self.quiet = true;
  self.world = MPI_COMM_SELF;
  const train::TrainSummary reference = train::run_training(alone, self);
  for (const Layout& layout : layouts) {
    SCOPED_TRACE(layout.name() + " on " + std::to_string(ranks) + " ranks");
    const train::TrainSummary split = train_on_ranks(pipeline_config(prefix, dir / layout.name(), layout), ranks);
    ASSERT_EQ(split.train_losses.size(), reference.train_losses.size());
    // The stages sum the tied embedding's two gradients, and the grad norm's stage sums, in another
    // order than one rank does (so do the tensor-parallel ranks their partial sums): the last bits of
    // fp32 gradients move, about 1e-9 of the loss after 4 steps at pp 2.
    EXPECT_LT(max_relative_difference(split.train_losses, reference.train_losses), 1e-5);
    ASSERT_EQ(split.val_losses.size(), reference.val_losses.size());
    for (std::size_t i = 0; i < split.val_losses.size(); ++i) {
      EXPECT_NEAR(split.val_losses[i].second, reference.val_losses[i].second, 1e-5 * reference.val_losses[i].second);
    }
    EXPECT_LT(split.train_losses.back(), split.train_losses.front());
  }
  if (ranks == 2) {
    // Recorded passes (model.enable_cuda_graph): the same run, bit for bit, on interleaved stages.
    train::TrainConfig interleaved = pipeline_config(prefix, dir / "interleaved-direct", {1, 2, 2});
    const train::TrainSummary direct = train_on_ranks(interleaved, ranks);
    interleaved.model.cuda_graph = true;
    interleaved.exp_manager.exp_dir = dir / "interleaved-recorded";
    EXPECT_EQ(train_on_ranks(interleaved, ranks).train_losses, direct.train_losses);
  }
  if (ranks == 4) {
    // Two data-parallel ranks of two interleaved stages: with overlap_param_sync each chunk's first
    // forward waits for its own weights' buckets, and the last stage its copy of the tied embedding,
    // which no forward reads, before its first backward. The same run, bit for bit.
    train::TrainConfig waiting = pipeline_config(prefix, dir / "param-sync-waiting", {1, 2, 2});
    waiting.optim.overlap_param_sync = false;
    train::TrainConfig overlapped = waiting;
    overlapped.optim.overlap_param_sync = true;
    overlapped.exp_manager.exp_dir = dir / "param-sync-overlapped";
    const train::TrainSummary waited = train_on_ranks(waiting, ranks);
    const train::TrainSummary overlapping = train_on_ranks(overlapped, ranks);
    EXPECT_EQ(overlapping.train_losses, waited.train_losses);
    EXPECT_EQ(overlapping.val_losses, waited.val_losses);
  }
  if (ranks == 2) {  // 1F1B needs a micro-batch per stage
    train::TrainConfig starved = pipeline_config(prefix, dir / "starved", {1, 2, 1});
    starved.data.global_batch_size = 1;
    expect_error_containing([&] { train_on_ranks(starved, ranks); }, "model.pipeline_model_parallel_size");
    // More stages than ranks
    expect_error_containing(
        [&] {
          train_on_ranks(pipeline_config(prefix, dir / "too-deep", {1, 4, 1}), ranks);
        },
        "model.pipeline_model_parallel_size = 4");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A run interrupted at step 3 resumes with another number of stages (and data-parallel ranks): the
// checkpoint holds the whole model and every stage's optimizer state by parameter name.
TEST(PipelineTraining, CheckpointsResumeAtAnotherNumberOfStages) {
  const int ranks = world_size();
  if (ranks != 2 && ranks != 4) GTEST_SKIP() << "runs on 2 and 4 ranks";
  const Layout saved = ranks == 2 ? Layout{1, 2, 1} : Layout{1, 1, 1};
  const Layout resumed_at = ranks == 2 ? Layout{1, 1, 1} : Layout{1, 4, 1};
  const int saving_ranks = ranks == 2 ? 2 : 1;
  const auto dir = shared_temp_dir("pipeline-reshard");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  auto config_of = [&](const Layout& layout, const std::string& run) {
    train::TrainConfig config = pipeline_config(prefix, dir / run, layout);
    config.data.global_batch_size = 4;
    config.trainer.max_steps = 6;
    config.exp_manager.checkpoint_callback_params.every_n_train_steps = 3;
    return config;
  };
  const train::TrainSummary straight = train_on_ranks(config_of(saved, "straight"), saving_ranks);
  train::TrainOptions stop;
  stop.stop_after_step = 3;
  const train::TrainSummary first = train_on_ranks(config_of(saved, "resharded"), saving_ranks, stop);
  const train::TrainSummary resumed = train_on_ranks(config_of(resumed_at, "resharded"), ranks);
  if (world_rank() == 0) {
    std::vector<double> joined = first.train_losses;
    joined.insert(joined.end(), resumed.train_losses.begin(), resumed.train_losses.end());
    ASSERT_EQ(joined.size(), straight.train_losses.size());
    // Without the Adam moments of every parameter the resumed steps would move far more than this.
    EXPECT_LT(max_relative_difference(joined, straight.train_losses), 1e-4);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace adamant::testing
