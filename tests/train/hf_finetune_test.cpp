// Fine-tuning from a Hugging Face GPT-2 folder (model.restore_from_path) under mpirun: the
// folder exported from a trained run starts every layout (fused_adam on one rank,
// distributed_fused_adam over the data-parallel ranks, tensor parallelism 2) at the same model.
#include <gtest/gtest.h>
#include <mpi.h>

#include "adamant/core/error.h"
#include "adamant/core/safetensors.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/hf_gpt2_folder.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

TEST(FineTune, RestoreFromPathStartsEveryLayoutAtTheExportedModel) {
  const int ranks = world_size(), rank = world_rank();
  const auto dir = shared_temp_dir("hf-finetune");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig source = tiny_config(prefix, dir / "source");
  source.model.openai_gelu = true;
  source.trainer.val_check_interval = 4;  // validates at step 0 and at the end
  const train::TrainSummary trained = train_on_ranks(source, ranks);
  const auto folder = dir / "hf";
  if (rank == 0) {
    train::export_hf_gpt2(*trained.last_checkpoint, folder, DType::f32);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  auto finetune = [&](const std::string& name, const std::string& optimizer, int tp) {
    train::TrainConfig c = source;
    c.exp_manager.exp_dir = dir / name;
    c.trainer.restore_from_path = folder;
    c.optim.name = optimizer;
    c.model.tensor_parallel_size = tp;
    c.model.make_vocab_size_divisible_by = 128 / tp;  // the same padded vocabulary at every tp
    c.model.sequence_parallel = tp > 1;
    c.trainer.max_steps = 2;
    c.trainer.val_check_interval = 2;
    return train_on_ranks(c, ranks);
  };
  const train::TrainSummary fused = finetune("fused", "fused_adam", 1);
  const train::TrainSummary distributed = finetune("distributed", "distributed_fused_adam", 1);
  ASSERT_FALSE(fused.val_losses.empty());
  ASSERT_EQ(fused.val_losses.front().first, 0);
  const double start = fused.val_losses.front().second;
  // The trained model, not a fresh init: its last validation loss (the padded vocabulary rows,
  // replaced by the mean row, move it a little).
  ASSERT_FALSE(trained.val_losses.empty());
  EXPECT_NEAR(start, trained.val_losses.back().second, 2e-3 * start);
  EXPECT_LT(start, trained.val_losses.front().second - 1e-3);
  EXPECT_EQ(distributed.val_losses.front().second, start);
  EXPECT_LT(max_relative_difference(distributed.train_losses, fused.train_losses), 1e-4);
  if (ranks % 2 == 0) {
    const train::TrainSummary split = finetune("tensor-parallel", "distributed_fused_adam", 2);
    EXPECT_NEAR(split.val_losses.front().second, start, 1e-5 * start);
    // A tensor-parallel checkpoint exports as the whole model.
    EXPECT_TRUE(rank != 0 || split.last_checkpoint.has_value());
    if (rank == 0 && split.last_checkpoint.has_value()) {
      train::export_hf_gpt2(*split.last_checkpoint, dir / "hf-from-tp", std::nullopt);
      const SafetensorsReader exported(dir / "hf-from-tp" / train::kHfWeightsFile);
      EXPECT_EQ(exported.entry("transformer.wte.weight").shape, (std::vector<std::int64_t>{50257, 32}));
      EXPECT_EQ(exported.entry("transformer.h.1.attn.c_attn.weight").shape, (std::vector<std::int64_t>{32, 96}));
      EXPECT_EQ(exported.entry("transformer.h.0.mlp.c_proj.weight").shape, (std::vector<std::int64_t>{128, 32}));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  // A folder of another model is refused naming the key to change.
  train::TrainConfig wider = source;
  wider.exp_manager.exp_dir = dir / "wider";
  wider.trainer.restore_from_path = folder;
  wider.model.hidden_size = 64;
  try {
    train_on_ranks(wider, ranks);
    ADD_FAILURE() << "another model loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.hidden_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adamant::testing
