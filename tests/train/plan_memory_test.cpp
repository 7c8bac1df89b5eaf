// The planner's memory per rank against the peak that real training runs measure (every Buffer the
// run holds, TrainSummary.memory.allocated_peak): one rank, two pipeline stages, two tensor-parallel
// ranks, and two stages times two data-parallel ranks, on the CPU under mpirun.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "adamant/train/layout_plan.h"
#include "adamant/train/rank_memory.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

struct Case {
  const char* name;
  int tp, pp, dp;
};

TEST(PlanMemory, EstimateMatchesTheMeasuredPeakOfTraining) {
  if (world_size() < 4) GTEST_SKIP() << "needs 4 ranks";
  const auto dir = shared_temp_dir("plan-memory");
  const auto prefix = write_random_dataset(dir, 200, 50257);
  for (const Case& c :
       {Case{"pp1-dp1", 1, 1, 1}, Case{"pp2", 1, 2, 1}, Case{"tp2", 2, 1, 1}, Case{"pp2-dp2", 1, 2, 2}}) {
    SCOPED_TRACE(c.name);
    train::TrainConfig config = tiny_config(prefix, dir / c.name);
    // Large enough that activations and the pipeline's passes in flight weigh next to the embedding.
    config.model.num_layers = 4;
    config.model.seq_length = 64;
    config.model.max_position_embeddings = 64;
    config.model.hidden_size = 64;
    config.model.ffn_hidden_size = 256;
    config.model.num_attention_heads = 4;
    config.data.micro_batch_size = 2;
    config.data.global_batch_size = 8;
    config.trainer.max_steps = 2;
    config.trainer.limit_val_batches = 0;
    config.model.tensor_parallel_size = c.tp;
    config.model.sequence_parallel = c.tp > 1;
    config.model.pipeline_parallel_size = c.pp;
    const int ranks = c.tp * c.pp * c.dp;
    const train::TrainSummary summary = train_on_ranks(config, ranks);
    if (world_rank() >= ranks) continue;
    const int micro_batches = config.data.global_batch_size / (config.data.micro_batch_size * c.dp);
    const train::ParallelLayout layout{c.tp, c.pp, 1, c.dp, micro_batches};
    const model::GptConfig gpt = train::layout_model(config, layout, 50257);
    const double planned = train::busiest_rank_memory(config, gpt, c.dp, micro_batches, Device::cpu()).total();
    const double measured = summary.memory.allocated_peak.max;
    ASSERT_GT(measured, 0);
    if (world_rank() == 0) std::printf("%s: planned %.0f bytes, measured peak %.0f\n", c.name, planned, measured);
    EXPECT_NEAR(planned / measured, 1.0, 0.05) << "planned " << planned << " bytes, measured " << measured;
  }
}

}  // namespace
}  // namespace adamant::testing
