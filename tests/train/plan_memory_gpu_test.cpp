// The planner's memory per GPU against the peak a short training run on one GPU measures (every byte
// Adamant allocates there: buffers and the CUDA kernels' workspaces; TrainSummary.memory.allocated_peak).
// The same runs' FLOPs reports: the GPU named, its datasheet peak, each step's model FLOP/s.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "adamant/core/cuda_runtime.h"
#include "adamant/train/gpu_peak.h"
#include "adamant/train/layout_plan.h"
#include "adamant/train/rank_memory.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

TEST(PlanMemoryGpu, EstimateMatchesTheMeasuredPeakOnOneGpu) {
  const auto dir = shared_temp_dir("plan-memory-gpu");
  const auto prefix = write_random_dataset(dir, 200, 50257);
  struct Case {
    const char* name;
    bool selective;
    DType grads;  // model.optim.grad_sync_dtype, and so the gradient buffer's dtype
  };
  for (const Case& c : {Case{"kept", false, DType::f32}, Case{"selective", true, DType::f32},
                        Case{"bf16-gradients", false, DType::bf16}}) {
    SCOPED_TRACE(c.name);
    const bool selective = c.selective;
    train::TrainConfig config = tiny_config(prefix, dir / c.name);
    config.trainer.accelerator = "gpu";
    config.optim.grad_sync_dtype = c.grads;
    config.model.grad_buffer = c.grads;  // as the config's parser derives it
    // A model whose buffers outweigh the kernels' fixed workspaces: 512 wide, 512 tokens per sample.
    model::GptConfig& m = config.model;
    m.seq_length = m.max_position_embeddings = m.hidden_size = 512;
    m.ffn_hidden_size = 4 * m.hidden_size;
    m.num_attention_heads = m.hidden_size / 64;
    m.num_layers *= 2;
    m.recompute_activation = selective;
    config.data.micro_batch_size = 4;
    config.data.global_batch_size = 2 * config.data.micro_batch_size;
    config.trainer.max_steps = 2;
    config.trainer.limit_val_batches = 0;
    const train::TrainSummary summary = train_on_ranks(config, 1);
    const model::GptConfig gpt = train::layout_model(config, {1, 1, 1, 1, 2}, 50257);
    const double planned = train::busiest_rank_memory(config, gpt, 1, 2, Device::cuda(0)).total();
    const double measured = summary.memory.allocated_peak.max;
    std::printf("planned %.0f bytes, measured peak %.0f\n", planned, measured);
    EXPECT_NEAR(planned / measured, 1.0, 0.05);

    EXPECT_EQ(summary.gpu_name, cuda::device_name(0));
    EXPECT_EQ(summary.peak_flops_per_gpu, train::datasheet_bf16_flops(summary.gpu_name).value_or(0.0));
    std::ifstream metrics(config.run_dir() / "metrics.jsonl");
    int steps = 0;
    for (std::string line; std::getline(metrics, line);) {
      const auto record = nlohmann::json::parse(line);
      if (record.at("type") != "train") continue;
      steps += 1;
      // One GPU: the step's tokens/s times the model's FLOPs per token.
      EXPECT_NEAR(record.at("model_tflops_per_gpu").get<double>(),
                  record.at("tokens_per_s").get<double>() * summary.model_flops_per_token / 1e12,
                  1e-9 * record.at("model_tflops_per_gpu").get<double>());
      EXPECT_EQ(record.contains("mfu"), summary.peak_flops_per_gpu > 0);
    }
    EXPECT_EQ(steps, 2);
  }
}

}  // namespace
}  // namespace adamant::testing
