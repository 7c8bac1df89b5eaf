#include "trainer_test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "adamant/core/error.h"
#include "adamant/data/indexed_dataset.h"
#include "support/test_data.h"

namespace adamant::testing {

std::filesystem::path write_random_dataset(const std::filesystem::path& dir, int documents, int max_id) {
  const auto prefix = dir / "tokens_text_document";
  if (world_rank() == 0) {
    std::mt19937 rng(20261130);
    data::IndexedDatasetBuilder builder(prefix, data::TokenDtype::u16);
    std::vector<std::int32_t> doc;
    for (int d = 0; d < documents; ++d) {
      doc.resize(20 + rng() % 60);
      // A learnable stream: mostly a repeating pattern, some noise.
      for (std::size_t i = 0; i < doc.size(); ++i) {
        doc[i] = (rng() % 4 == 0) ? static_cast<std::int32_t>(rng() % static_cast<unsigned>(max_id))
                                  : static_cast<std::int32_t>((i * 7 + d) % 97);
      }
      builder.add_sequence(doc);
      builder.end_document();
    }
    builder.finalize();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return prefix;
}

train::TrainConfig tiny_config(const std::filesystem::path& prefix, const std::filesystem::path& run_dir) {
  train::TrainConfig c;
  c.trainer.accelerator = "cpu";
  c.trainer.precision = DType::bf16;
  c.trainer.max_steps = 4;
  c.trainer.val_check_interval = 2;
  c.trainer.limit_val_batches = 1;
  c.optim.gradient_clip_val = 0.0;
  c.data.micro_batch_size = 1;
  c.data.global_batch_size = 2;
  c.optim.megatron_amp_O2 = true;
  c.model.seq_length = 16;
  c.model.max_position_embeddings = 16;
  c.model.num_layers = 2;
  c.model.hidden_size = 32;
  c.model.ffn_hidden_size = 128;
  c.model.num_attention_heads = 2;
  c.model.hidden_dropout = 0.0;
  c.model.attention_dropout = 0.0;
  c.trainer.seed = 7;
  const auto data = data_dir();
  c.data.tokenizer.vocab_file = data / "gpt2" / "encoder.json";
  c.data.tokenizer.merge_file = data / "gpt2" / "vocab.bpe";
  c.data.data_prefix = {{1.0, prefix.string()}};
  c.data.splits_string = "90,10,0";
  c.optim.name = "distributed_fused_adam";
  c.sched.lr = 2e-3;
  c.optim.weight_decay = 0.1;
  c.optim.beta2 = 0.95;
  c.optim.bucket_cap_mb = 0.5;  // several buckets, parameters spanning them
  c.sched.warmup_steps = 1;
  c.sched.min_lr = 2e-4;
  c.exp_manager.exp_dir = run_dir;
  c.exp_manager.name = "run";
  c.exp_manager.resume_if_exists = true;
  c.exp_manager.checkpoint_callback_params.every_n_train_steps = 0;
  c.exp_manager.checkpoint_callback_params.save_top_k = -1;
  return c;
}

train::TrainSummary train_on_ranks(const train::TrainConfig& config, int ranks, train::TrainOptions options) {
  const int rank = world_rank();
  MPI_Comm group = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < ranks ? 0 : MPI_UNDEFINED, rank, &group);
  train::TrainSummary summary;
  if (group != MPI_COMM_NULL) {
    options.quiet = true;
    options.world = group;
    summary = train::run_training(config, options);
    MPI_Comm_free(&group);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return summary;
}

double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-30));
  }
  return worst;
}

void expect_error_containing(const std::function<void()>& run, const std::string& text) {
  try {
    run();
    ADD_FAILURE() << "expected an error containing: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace adamant::testing
