// The TensorBoard event files of a run, read back by an independent Python reader
// (tensorboard_events.py: its own CRC32C and protocol-buffer decoding) and checked
// scalar by scalar against metrics.jsonl, across a resumed run; and the record framing
// against a known CRC32C vector.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "adamant/train/metrics.h"
#include "adamant/train/tensorboard_writer.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

int run_reader(const std::filesystem::path& run_dir, int files, int resumed_step) {
  const std::string command = std::string("python3 ") + ADAMANT_TENSORBOARD_READER + " '" + run_dir.string() + "' " +
                              std::to_string(files) + " " + std::to_string(resumed_step);
  return std::system(command.c_str());
}

TEST(TensorBoard, MaskedCrcOfAKnownVector) {
  // CRC32C("123456789") = 0xE3069283; masked: rotate right by 15, add 0xA282EAD8.
  const std::uint32_t crc = 0xE3069283u;
  EXPECT_EQ(train::tfrecord_masked_crc("123456789", 9), ((crc >> 15) | (crc << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, EventFilesHoldEveryScalarOfMetricsAcrossAResume) {
  const int ranks = std::min(world_size(), 2);
  const auto dir = shared_temp_dir("tensorboard");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "run");
  config.trainer.max_steps = 4;
  config.exp_manager.checkpoint_callback_params.every_n_train_steps = 4;
  train_on_ranks(config, ranks);
  if (world_rank() == 0) {
    EXPECT_EQ(run_reader(config.run_dir(), 1, 0), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  config.trainer.max_steps = 6;
  config.exp_manager.resume_if_exists = true;
  train_on_ranks(config, ranks);
  if (world_rank() == 0) {
    EXPECT_EQ(run_reader(config.run_dir(), 2, 4), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // A fresh run in the same folder (told to replace the earlier run, whose checkpoints are
  // there) starts the curves over.
  config.exp_manager.resume_if_exists = false;
  config.exp_manager.overwrite_existing_run = true;
  config.trainer.max_steps = 2;
  train_on_ranks(config, ranks);
  if (world_rank() == 0) {
    EXPECT_EQ(run_reader(config.run_dir(), 1, 0), 0);
  }
}

// A GPU run's steps carry its model FLOP/s and, where the GPU's peak is known, its MFU: both
// reach the event file as they are in metrics.jsonl (the steps are a GPU run's records, written
// here without a GPU).
TEST(TensorBoard, GpuStepsCarryTheirFlopsAndMfu) {
  if (world_rank() != 0) return;
  const auto dir = std::filesystem::temp_directory_path() / "adamant_tensorboard_gpu_steps";
  std::filesystem::remove_all(dir);
  {
    train::MetricsLog log(dir / "metrics.jsonl", std::nullopt);
    train::TensorBoardWriter events(dir, 0);
    for (int step = 1; step <= 3; ++step) {
      train::StepMetrics m;
      m.step = step;
      m.loss = 10.0 - step;
      m.tokens_per_second = 400000.0 + step;
      m.model_flops_per_gpu = 461.5e12 + step * 1e9;
      m.peak_flops_per_gpu = step == 3 ? 0.0 : 989e12;  // the last as on a GPU without a known peak
      log.step(m);
      train::write_step_scalars(events, m);
    }
  }
  EXPECT_EQ(run_reader(dir, 1, 0), 0);
  std::filesystem::remove_all(dir);
}

TEST(TensorBoard, UnwritableFolderIsAnError) {
  if (world_rank() != 0) return;
  const auto dir = std::filesystem::temp_directory_path() / "adamant_tensorboard_blocked";
  std::filesystem::remove_all(dir);
  std::ofstream(dir.string()) << "a file where the folder should be";
  EXPECT_THROW(train::TensorBoardWriter(dir / "run", 0), std::exception);
  std::filesystem::remove(dir);
}

}  // namespace
}  // namespace adamant::testing
