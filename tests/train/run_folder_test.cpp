// What training does to its run folder (exp_dir/name), under mpirun: checkpoints belong to the
// run that wrote them, a second run there refuses to mix with them, resumption follows `latest`
// and falls back past a damaged checkpoint, exp_manager.resume_from_checkpoint continues from a
// named checkpoint, leftovers of an interrupted save are removed, and metrics.jsonl never holds a
// step twice.
#include <gtest/gtest.h>
#include <mpi.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "adamant/core/error.h"
#include "adamant/train/checkpoint.h"
#include "trainer_test_util.h"

namespace adamant::testing {
namespace {

int ranks_used() { return std::min(world_size(), 2); }

// The error every rank of the run gets (the others get none).
std::string error_of(const train::TrainConfig& config) {
  std::string message;
  try {
    train_on_ranks(config, ranks_used());
  } catch (const Error& e) {
    message = e.what();
    MPI_Barrier(MPI_COMM_WORLD);  // train_on_ranks' closing barrier was skipped
  }
  return message;
}

std::vector<std::string> folder_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& p : train::complete_checkpoints(dir)) names.push_back(p.filename().string());
  return names;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// How often each step appears among the train records of metrics.jsonl, and how many resume records it has.
std::map<std::int64_t, int> train_step_counts(const std::filesystem::path& file, int* resumes) {
  std::map<std::int64_t, int> counts;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.at("type") == "train") counts[record.at("step").get<std::int64_t>()] += 1;
    if (record.at("type") == "resume" && resumes != nullptr) *resumes += 1;
  }
  return counts;
}

TEST(RunFolder, SecondFreshRunRefusesAnotherRunsCheckpointsUnlessToldAndRotatesOnlyItsOwn) {
  const auto dir = shared_temp_dir("run-folder-second-run");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig a = tiny_config(prefix, dir / "runs");
  a.exp_manager.resume_if_exists = false;
  a.trainer.max_steps = 6;
  a.exp_manager.checkpoint_callback_params.every_n_train_steps = 2;
  a.exp_manager.checkpoint_callback_params.save_top_k = 2;
  train_on_ranks(a, ranks_used());
  const auto checkpoints = a.run_dir() / "checkpoints";
  EXPECT_EQ(folder_names(checkpoints), (std::vector<std::string>{"step_00000004", "step_00000006"}));
  const std::string run_a = train::checkpoint_run_id(checkpoints / "step_00000006");
  EXPECT_EQ(run_a.size(), 16u);

  // Run B in the same folder (another learning rate): refused, naming the folder and the ways out.
  train::TrainConfig b = a;
  b.trainer.max_steps = 4;
  b.sched.lr = 1e-3;
  const std::string refusal = error_of(b);
  EXPECT_NE(refusal.find(a.run_dir().string()), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("exp_manager.overwrite_existing_run=true"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("exp_manager.resume_if_exists=true"), std::string::npos) << refusal;
  EXPECT_EQ(folder_names(checkpoints), (std::vector<std::string>{"step_00000004", "step_00000006"}));

  // A foreign checkpoint in the folder (another run's) survives rotation of a continued run A.
  if (world_rank() == 0) {
    std::filesystem::copy(checkpoints / "step_00000004", dir / "foreign", std::filesystem::copy_options::recursive);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  train::TrainConfig other = tiny_config(prefix, dir / "other-runs");
  other.trainer.max_steps = 1;
  train_on_ranks(other, ranks_used());
  if (world_rank() == 0) {
    std::filesystem::copy(other.run_dir() / "checkpoints" / "step_00000001", checkpoints / "step_00000001",
                          std::filesystem::copy_options::recursive);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  train::TrainConfig continued = a;
  continued.exp_manager.resume_if_exists = true;
  continued.trainer.max_steps = 10;
  const train::TrainSummary more = train_on_ranks(continued, ranks_used());
  if (world_rank() < ranks_used()) {
    EXPECT_EQ(more.train_losses.size(), 4u);  // from A's step 6, named by latest
  }
  EXPECT_EQ(folder_names(checkpoints), (std::vector<std::string>{"step_00000001", "step_00000008", "step_00000010"}));
  EXPECT_EQ(train::checkpoint_run_id(checkpoints / "step_00000010"), run_a);
  EXPECT_NE(train::checkpoint_run_id(checkpoints / "step_00000001"), run_a);

  // Told to start over, run B deletes the earlier checkpoints and keeps its own two.
  b.exp_manager.overwrite_existing_run = true;
  train_on_ranks(b, ranks_used());
  EXPECT_EQ(folder_names(checkpoints), (std::vector<std::string>{"step_00000002", "step_00000004"}));
  const std::string run_b = train::checkpoint_run_id(checkpoints / "step_00000004");
  EXPECT_NE(run_b, run_a);
  EXPECT_EQ(train::checkpoint_run_id(checkpoints / "step_00000002"), run_b);
  EXPECT_EQ(read_text(checkpoints / "latest"), "step_00000004\n");
}

TEST(RunFolder, ResumeFallsBackPastADamagedNewestCheckpointAndNeverRepeatsAStepInMetrics) {
  const auto dir = shared_temp_dir("run-folder-damaged");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "straight");
  config.trainer.max_steps = 8;
  const train::TrainSummary straight = train_on_ranks(config, ranks_used());

  config.exp_manager.exp_dir = dir / "interrupted";
  config.exp_manager.checkpoint_callback_params.every_n_train_steps = 2;
  train::TrainOptions stop;
  stop.stop_after_step = 7;  // checkpoints at 2, 4, 6; steps 1..7 in metrics.jsonl
  train_on_ranks(config, ranks_used(), stop);
  const auto checkpoints = config.run_dir() / "checkpoints";
  // Damage the newest checkpoint's optimizer state (one byte in the middle of a tensor) and
  // leave what an interrupted save leaves behind.
  if (world_rank() == 0) {
    const auto victim = checkpoints / "step_00000006" / "optim_rank_0.adm";
    std::fstream file(victim, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(std::filesystem::file_size(victim) / 3));
    file.put('\x5a');
    std::filesystem::create_directories(checkpoints / "step_00000008.partial");
    std::ofstream(checkpoints / "step_00000008.partial" / "model.adm.tmp.4242") << "torn";
    std::ofstream(checkpoints / "latest.tmp.4242") << "step_";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const train::TrainSummary resumed = train_on_ranks(config, ranks_used());
  if (world_rank() < ranks_used()) {
    // Resumed from step 4: steps 5..8 again, exactly as the uninterrupted run computed them.
    ASSERT_EQ(resumed.train_losses.size(), 4u);
    EXPECT_EQ(std::vector<double>(resumed.train_losses),
              std::vector<double>(straight.train_losses.begin() + 4, straight.train_losses.end()));
  }
  EXPECT_FALSE(std::filesystem::exists(checkpoints / "step_00000008.partial"));
  EXPECT_FALSE(std::filesystem::exists(checkpoints / "latest.tmp.4242"));
  int resumes = 0;
  const auto counts = train_step_counts(config.run_dir() / "metrics.jsonl", &resumes);
  EXPECT_EQ(resumes, 1);
  ASSERT_EQ(counts.size(), 8u);
  for (const auto& [step, count] : counts) EXPECT_EQ(count, 1) << "step " << step;

  // `latest` naming a folder that is gone: the newest complete checkpoint is used.
  if (world_rank() == 0) std::filesystem::remove_all(checkpoints / "step_00000008");
  MPI_Barrier(MPI_COMM_WORLD);
  const train::TrainSummary again = train_on_ranks(config, ranks_used());
  if (world_rank() < ranks_used()) {
    ASSERT_EQ(again.train_losses.size(), 2u);  // from step 6 (rewritten intact by the resumed run)
    EXPECT_EQ(again.train_losses.back(), straight.train_losses.back());
  }
}

TEST(RunFolder, ResumeFromCheckpointContinuesANamedCheckpointAndAChangedBatchIsNamed) {
  const auto dir = shared_temp_dir("run-folder-named");
  const auto prefix = write_random_dataset(dir, 400, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "first");
  config.trainer.max_steps = 4;
  config.exp_manager.checkpoint_callback_params.every_n_train_steps = 2;
  const train::TrainSummary first = train_on_ranks(config, ranks_used());
  const auto step2 = config.run_dir() / "checkpoints" / "step_00000002";

  train::TrainConfig named = config;
  named.exp_manager.exp_dir = dir / "second";
  named.exp_manager.resume_if_exists = false;
  named.exp_manager.resume_from_checkpoint = step2;
  const train::TrainSummary continued = train_on_ranks(named, ranks_used());
  if (world_rank() < ranks_used()) {
    ASSERT_EQ(continued.train_losses.size(), 2u);
    EXPECT_EQ(continued.train_losses, std::vector<double>(first.train_losses.begin() + 2, first.train_losses.end()));
  }
  // A run of its own in the new folder: the named checkpoint's run is not continued there.
  EXPECT_NE(train::checkpoint_run_id(named.run_dir() / "checkpoints" / "step_00000004"),
            train::checkpoint_run_id(step2));

  train::TrainConfig missing = named;
  missing.exp_manager.exp_dir = dir / "third";
  missing.exp_manager.resume_from_checkpoint = dir / "nowhere" / "step_00000002";
  const std::string missing_error = error_of(missing);
  EXPECT_NE(missing_error.find("exp_manager.resume_from_checkpoint"), std::string::npos) << missing_error;
  EXPECT_NE(missing_error.find("nowhere"), std::string::npos) << missing_error;

  train::TrainConfig bigger = named;
  bigger.exp_manager.exp_dir = dir / "fourth";
  bigger.data.global_batch_size = 4;
  const std::string batch_error = error_of(bigger);
  EXPECT_NE(batch_error.find("model.global_batch_size=2"), std::string::npos) << batch_error;
  EXPECT_NE(batch_error.find("model.global_batch_size=4"), std::string::npos) << batch_error;
}

// An absurd size is refused from the config alone, before any allocation that grows with it.
TEST(RunFolder, AnAbsurdModelIsRefusedBeforeAllocating) {
  const auto dir = shared_temp_dir("run-folder-absurd");
  const auto prefix = write_random_dataset(dir, 50, 50257);
  train::TrainConfig config = tiny_config(prefix, dir / "runs");
  config.model.num_layers = 1000000;
  config.model.hidden_size = 768;
  config.model.ffn_hidden_size = 3072;
  config.model.num_attention_heads = 12;
  const std::string message = error_of(config);
  EXPECT_NE(message.find("model.num_layers=1000000"), std::string::npos) << message;
  EXPECT_NE(message.find("of host memory per rank"), std::string::npos) << message;
}

}  // namespace
}  // namespace adamant::testing
