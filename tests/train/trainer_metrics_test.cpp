// What a training run reports about itself under mpirun: the exposed
// communication time of every step in metrics.jsonl, and the run's closing
// summary record with the mean of those times and the peak memory per rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "adamant/model/param_layout.h"
#include "adamant/train/run_setup.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

std::vector<nlohmann::json> read_records(const std::filesystem::path& file, const std::string& type) {
  std::vector<nlohmann::json> records;
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("type") == type) records.push_back(std::move(j));
  }
  return records;
}

TEST(TrainerMetrics, ExposedCommunicationAndPeakMemoryAreReported) {
  const int ranks = std::min(world_size(), 2);
  const auto dir = shared_temp_dir("metrics");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "run");
  config.exp_manager.create_checkpoint_callback = false;
  const train::TrainSummary summary = train_on_ranks(config, ranks);
  if (world_rank() == 0) {
    const auto file = config.run_dir() / "metrics.jsonl";
    const std::vector<nlohmann::json> steps = read_records(file, "train");
    ASSERT_EQ(steps.size(), 4u);
    ASSERT_EQ(summary.exposed_comm_ms.size(), 4u);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      ASSERT_TRUE(steps[i].contains("exposed_comm_ms")) << steps[i].dump();
      const double ms = steps[i].at("exposed_comm_ms").get<double>();
      EXPECT_TRUE(std::isfinite(ms) && ms >= 0.0) << ms;
      EXPECT_EQ(ms, summary.exposed_comm_ms[i]);
    }

    const std::vector<nlohmann::json> summaries = read_records(file, "summary");
    ASSERT_EQ(summaries.size(), 1u);
    const nlohmann::json& s = summaries.front();
    EXPECT_EQ(s.at("steps").get<int>(), 4);
    EXPECT_EQ(s.at("world_size").get<int>(), ranks);
    EXPECT_EQ(s.at("data_parallel_size").get<int>(), ranks);
    const double mean_after_first =
        (summary.exposed_comm_ms[1] + summary.exposed_comm_ms[2] + summary.exposed_comm_ms[3]) / 3.0;
    EXPECT_NEAR(s.at("exposed_comm_ms").get<double>(), mean_after_first, 1e-9 * (1.0 + mean_after_first));
    EXPECT_EQ(summary.mean_exposed_comm_ms, s.at("exposed_comm_ms").get<double>());
    EXPECT_GT(s.at("tokens_per_s").get<double>(), 0.0);
    EXPECT_FALSE(s.contains("peak_device_in_use_bytes_max"));  // a CPU run has no cudaMemGetInfo figure

    // Every rank holds at least its bf16 weights, the fp32 gradient buffer and its 1/dp share of the
    // fp32 main weights, exp_avg and exp_avg_sq.
    const auto params = model::build_param_list(train::gpt_config_of(config, 50257));
    const double n = static_cast<double>(params.total_numel);
    const double lower_bound = n * (2 + 4) + n * 12 / ranks;
    const double peak_max = s.at("peak_allocated_bytes_max").get<double>();
    const double peak_min = s.at("peak_allocated_bytes_min").get<double>();
    EXPECT_GE(peak_min, lower_bound);
    EXPECT_GE(peak_max, peak_min);
    EXPECT_EQ(peak_max, summary.memory.allocated_peak.max);
    EXPECT_EQ(peak_min, summary.memory.allocated_peak.min);

    // MFU's numerator per token (bench/run_metrics.py): 6 N + 12 layers seq hidden of the whole model.
    const model::GptConfig gpt = train::gpt_config_of(config, 50257);
    EXPECT_DOUBLE_EQ(s.at("model_flops_per_token").get<double>(),
                     6.0 * n + 12.0 * gpt.num_layers * static_cast<double>(gpt.seq_length) * gpt.hidden_size);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace adamant::testing
