// adamant bench's measurement under mpirun: the run it makes (no validation, no
// checkpoints, nothing resumed) and the figures it derives, against closed forms.
#include "adamant/train/benchmark.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "adamant/core/error.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

TEST(Benchmark, TimesTheStepsAfterTheWarmUp) {
  const int ranks = world_size();
  const auto dir = shared_temp_dir("bench");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "ignored");
  config.data.global_batch_size = 2 * ranks;
  config.exp_manager.create_checkpoint_callback = true;  // the benchmark turns these off
  config.exp_manager.checkpoint_callback_params.every_n_train_steps = 1;
  train::BenchmarkOptions options;
  options.warmup_steps = 1;
  options.steps = 3;
  const train::TrainConfig bench = train::benchmark_config(config, options, dir / "bench");
  train::TrainOptions quiet;
  quiet.quiet = true;
  const train::BenchmarkResult r = train::run_benchmark(bench, options, quiet);

  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.world_size, ranks);
  EXPECT_EQ(r.data_parallel_size, ranks);
  EXPECT_GT(r.step_ms, 0.0);
  const double tokens_per_step = 2.0 * ranks * 16;  // global batch x sequence
  EXPECT_DOUBLE_EQ(r.tokens_per_second, tokens_per_step / (r.step_ms / 1e3));
  EXPECT_DOUBLE_EQ(r.tokens_per_second_per_device, r.tokens_per_second / ranks);
  // GPT-3 with tied embeddings: V C + S C + layers (12 C^2 + 13 C) + 2 C, V padded to 50304.
  const std::int64_t C = 32, layers = 2, V = 50304, S = 16, F = 128;
  const std::int64_t per_layer = 4 * C + (3 * C * C + 3 * C) + (C * C + C) + (C * F + F) + (F * C + C);
  EXPECT_EQ(r.parameters, V * C + S * C + layers * per_layer + 2 * C);
  EXPECT_DOUBLE_EQ(r.model_flops_per_token, 6.0 * static_cast<double>(r.parameters) + 12.0 * layers * S * C);
  EXPECT_GE(r.exposed_comm_ms, 0.0);
  EXPECT_TRUE(std::isfinite(r.first_loss) && std::isfinite(r.last_loss));
  EXPECT_GT(r.memory.allocated_peak.min, 0.0);
  EXPECT_FALSE(std::filesystem::exists(bench.run_dir() / "checkpoints")) << "a benchmark wrote a checkpoint";
  const nlohmann::json j = nlohmann::json::parse(train::to_json(r));
  EXPECT_DOUBLE_EQ(j.at("tokens_per_s").get<double>(), r.tokens_per_second);
  EXPECT_EQ(j.at("parameters").get<std::int64_t>(), r.parameters);
}

// With pipeline stages the data-parallel size is what tp x pp leaves of the world.
TEST(Benchmark, CountsPipelineStagesInTheLayout) {
  const int ranks = world_size();
  if (ranks % 2 != 0) GTEST_SKIP() << "needs an even number of ranks";
  const auto dir = shared_temp_dir("bench-pipeline");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "ignored");
  config.model.pipeline_parallel_size = 2;
  config.data.global_batch_size = ranks;  // 2 micro-batches per data-parallel rank: one per stage
  train::BenchmarkOptions options;
  options.warmup_steps = 1;
  options.steps = 2;
  train::TrainOptions quiet;
  quiet.quiet = true;
  const train::BenchmarkResult r =
      train::run_benchmark(train::benchmark_config(config, options, dir / "bench"), options, quiet);
  EXPECT_EQ(r.pipeline_parallel_size, 2);
  EXPECT_EQ(r.data_parallel_size, ranks / 2);
  EXPECT_NE(train::describe(r).find("x pp 2"), std::string::npos) << train::describe(r);
  EXPECT_EQ(nlohmann::json::parse(train::to_json(r)).at("pp").get<int>(), 2);
}

TEST(Benchmark, NoTimedStepIsAnError) {
  train::BenchmarkOptions options;
  options.steps = 0;
  try {
    train::benchmark_config(train::TrainConfig{}, options, "/tmp/unused");
    FAIL() << "a benchmark of 0 steps was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--steps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adamant::testing
