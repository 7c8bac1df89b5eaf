#include "adamant/train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/mpi_session.h"
#include "adamant/comm/process_grid.h"
#include "adamant/core/atomic_file.h"
#include "adamant/core/error.h"
#include "adamant/core/file_write.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/data/data_loader.h"
#include "adamant/data/gpt_datasets.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/param_layout.h"
#include "adamant/optim/lr_schedule.h"
#include "adamant/optim/optimizer.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/checkpoint_roles.h"
#include "adamant/train/loss_plot.h"
#include "adamant/train/memory_report.h"
#include "adamant/train/metrics.h"
#include "adamant/train/run_checkpoints.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/tensorboard_writer.h"

namespace adamant::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Mean of `local_sum / local_count` over the group, as the sum of sums over the sum of counts.
double group_mean(comm::Communicator& group, double local_sum, double local_count) {
  double values[2] = {local_sum, local_count};
  group.all_reduce(Tensor::flat(values, DType::f64, Device::cpu(), 2), comm::ReduceOp::sum);
  return values[0] / values[1];
}

// The mean of the exposed communication times after the first step (which includes one-off set-up
// costs), or the first one alone.
double mean_after_first(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  if (values.size() == 1) return values.front();
  double sum = 0;
  for (std::size_t i = 1; i < values.size(); ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - 1);
}

// Token ids at or above the vocabulary mean the data was tokenized with another vocabulary.
void check_token_range(const data::MicroBatch& batch, int vocab_size, const std::vector<std::filesystem::path>& data) {
  const auto [lo, hi] = std::minmax_element(batch.tokens.begin(), batch.tokens.end());
  const auto [tlo, thi] = std::minmax_element(batch.targets.begin(), batch.targets.end());
  const std::int32_t max_id = std::max(*hi, *thi);
  const std::int32_t min_id = std::min(*lo, *tlo);
  if (max_id >= vocab_size || min_id < 0) {
    std::string files;
    for (const auto& f : data) files += (files.empty() ? "" : ", ") + f.string();
    fail(
        "the data ({}) holds token id {}, outside the tokenizer's vocabulary of {} tokens: it was preprocessed with "
        "another tokenizer; re-run `adamant preprocess` with the vocabulary in model.tokenizer",
        files, max_id >= vocab_size ? max_id : min_id, vocab_size);
  }
}

// Samples are consumed a global batch per step, so a checkpoint whose consumed_samples is not
// step x model.global_batch_size was written with another global batch.
void check_same_global_batch(const TrainingPosition& position, const std::filesystem::path& checkpoint,
                             int global_batch_size) {
  if (position.step == 0 || position.consumed_samples == position.step * global_batch_size) return;
  fail(
      "checkpoint {} was written with model.global_batch_size={} ({} samples in {} steps) and this run has "
      "model.global_batch_size={}: the data position and the learning-rate schedule would not continue; resume "
      "with model.global_batch_size={}, or start a new run (another exp_manager.name) to train with the new batch",
      checkpoint.string(), position.consumed_samples / position.step, position.consumed_samples, position.step,
      global_batch_size, position.consumed_samples / position.step);
}

// One micro-batch copied out of the loader (whose views last until its next call), with storage
// kept from step to step.
struct StoredMicroBatch {
  std::vector<std::int32_t> tokens, targets;
};

// The micro-batches of one step of `loader` into `batches`, and their model views into `views`.
void next_step_batches(data::DataLoader& loader, int vocab_size, const std::vector<std::filesystem::path>& data,
                       std::vector<StoredMicroBatch>& batches, std::vector<model::MicroBatch>& views) {
  batches.resize(static_cast<std::size_t>(loader.num_micro_batches()));
  views.resize(batches.size());
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const data::MicroBatch& batch = loader.next();
    check_token_range(batch, vocab_size, data);
    StoredMicroBatch& stored = batches[i];
    stored.tokens.assign(batch.tokens.begin(), batch.tokens.end());
    stored.targets.assign(batch.targets.begin(), batch.targets.end());
    views[i] = to_model_batch(batch);
    views[i].tokens = stored.tokens;
    views[i].targets = stored.targets;
  }
}

// The mean loss of a step's micro-batches over the data-parallel ranks, from the sum the last
// pipeline stage holds (sent to the other stages first).
double mean_step_loss(comm::ProcessGrid& grid, double last_stage_sum, int micro_batches) {
  double sum = last_stage_sum;
  if (grid.pp_size() > 1) {
    grid.pipeline_group().broadcast(Tensor::flat(&sum, DType::f64, Device::cpu(), 1), grid.pp_size() - 1);
  }
  return group_mean(grid.data_parallel_group(), sum, micro_batches);
}

double validation_loss(PipelineRunner& pipeline, data::DataLoader& loader, comm::ProcessGrid& grid, int vocab_size,
                       const std::vector<std::filesystem::path>& data, std::vector<StoredMicroBatch>& batches,
                       std::vector<model::MicroBatch>& views) {
  loader.reset(0);
  double sum = 0;
  double count = 0;
  while (loader.has_next()) {
    next_step_batches(loader, vocab_size, data, batches, views);
    sum += pipeline.evaluate(views);
    count += static_cast<double>(views.size());
  }
  return mean_step_loss(grid, sum, static_cast<int>(count));
}

}  // namespace

TrainSummary run_training(const TrainConfig& config, const TrainOptions& options) {
  comm::MpiCommunicator world(options.world);
  RunSetup setup(config, world);
  comm::ProcessGrid& grid = setup.grid();
  const bool leader = grid.world_rank() == 0;
  const bool verbose = leader && !options.quiet;
  // Under mpirun a rank's stdout is a pseudo-terminal even when mpirun's own output goes to a
  // file, so the rewritten status line is kept for runs started without mpirun.
  const bool live_display =
      verbose && ::isatty(::fileno(stdout)) != 0 && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr;
  model::GptModel& model = setup.model();
  optim::Optimizer& optimizer = setup.optimizer();
  PipelineRunner& pipeline = setup.pipeline();
  const int vocab_size = model.config().vocab_size;
  const int dp = grid.dp_size();
  const std::int64_t tokens_per_step =
      static_cast<std::int64_t>(config.data.global_batch_size) * config.model.seq_length;

  if (config.exp_manager.checkpoint_callback_params.node_local && config.exp_manager.resume_if_exists) {
    // On node-local disks every host must hold the same newest checkpoint (a save cut off
    // before every host renamed its folder leaves them apart): refused on every rank.
    agreed_latest_checkpoint(CheckpointStore(config.run_dir() / "checkpoints", -1), grid.world());
  }
  const RunStart start = prepare_run_start(config, grid.world());
  if (leader) {
    for (const auto& warning : start.warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
  CheckpointStore checkpoints(config.run_dir() / "checkpoints",
                              config.exp_manager.checkpoint_callback_params.save_top_k, start.run_id,
                              config.exp_manager.checkpoint_callback_params.node_local);
  TrainingPosition position;
  if (start.checkpoint) {
    position = load_checkpoint(*start.checkpoint, model, &optimizer);
    check_same_global_batch(position, *start.checkpoint, config.data.global_batch_size);
    if (verbose) {
      std::printf("resumed from %s (step %lld)\n", start.checkpoint->string().c_str(),
                  static_cast<long long>(position.step));
    }
  }
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  if (leader) {
    create_folder(config.run_dir(), "run (exp_manager.exp_dir/exp_manager.name)");
    write_file_atomically(config.run_dir() / "config.yaml", to_yaml(config));
    metrics =
        std::make_unique<MetricsLog>(config.run_dir() / "metrics.jsonl",
                                     start.checkpoint ? std::optional<std::int64_t>(position.step) : std::nullopt);
    tensorboard = std::make_unique<TensorBoardWriter>(config.run_dir(), position.step);
  }
  MemoryWatch memory(model.device());
  const MemoryReport setup_memory = memory.report(world);
  if (verbose) {
    std::printf("%s", setup.describe().c_str());
    std::printf("memory per rank after set-up: %s\n", format_memory(setup_memory).c_str());
    std::fflush(stdout);  // start-up facts show before the first (possibly long) step
  }

  data::DataLoader& train_loader = setup.train_loader();
  train_loader.reset(position.consumed_samples);
  const int micro_batches = train_loader.num_micro_batches();
  const double grad_scale = 1.0 / (static_cast<double>(micro_batches) * dp);
  const optim::LrSchedule schedule = setup.lr_schedule();
  const model::GradReadyFn on_grad_ready = [&optimizer](std::size_t index) { optimizer.on_grad_ready(index); };
  std::vector<StoredMicroBatch> step_batches;  // a step's micro-batches, storage kept between steps
  std::vector<model::MicroBatch> step_views;

  TrainSummary summary;
  summary.steps_done = position.step;
  summary.model_parameters =
      static_cast<std::int64_t>(model::build_param_list(model.config().whole_model()).total_numel);
  const std::int64_t max_steps = config.trainer.max_steps;
  const std::int64_t last_step = options.stop_after_step ? std::min(max_steps, *options.stop_after_step) : max_steps;
  const auto run_start = Clock::now();
  std::int64_t steps_this_run = 0;
  double step_seconds_total = 0;
  const int every_n = config.exp_manager.create_checkpoint_callback
                          ? config.exp_manager.checkpoint_callback_params.every_n_train_steps
                          : 0;

  auto validate = [&](std::int64_t step) {
    if (setup.valid_loader() == nullptr) return;
    const double val = validation_loss(pipeline, *setup.valid_loader(), grid, vocab_size, setup.data_files(),
                                       step_batches, step_views);
    summary.val_losses.emplace_back(step, val);
    if (leader) {
      metrics->validation(step, val);
      tensorboard->scalar("val_loss", step, val);
    }
    if (verbose) {
      std::printf("%svalidation | step %lld | val loss %.4f\n", live_display ? "\r\033[K" : "",
                  static_cast<long long>(step), val);
      std::fflush(stdout);
    }
  };

  // A first validation before any update shows where training starts (as NeMo's sanity check does).
  if (position.step == 0 && last_step > 0 && config.trainer.val_check_interval > 0) validate(0);
  optimizer.take_exposed_comm_ms();  // waits of set-up or of loading a checkpoint are no step's
  while (position.step < last_step) {
    ADAMANT_CHECK(train_loader.has_next(),
                  "the training data ran out at step {}; the dataset is smaller than "
                  "trainer.max_steps x model.global_batch_size samples",
                  position.step);
    const auto step_start = Clock::now();
    const double lr = optim::learning_rate(schedule, position.step);
    optimizer.wait_for_params();
    next_step_batches(train_loader, vocab_size, setup.data_files(), step_batches, step_views);
    const double loss_sum = pipeline.train_step(step_views, static_cast<float>(optimizer.loss_scale()), on_grad_ready);
    const optim::StepResult result = optimizer.step(lr, grad_scale);
    const double loss = mean_step_loss(grid, loss_sum, micro_batches);
    memory.sample();
    position.step += 1;
    position.consumed_samples = train_loader.consumed_samples();
    const double step_seconds = seconds_since(step_start);
    steps_this_run += 1;
    step_seconds_total += step_seconds;
    summary.train_losses.push_back(loss);
    summary.step_seconds.push_back(step_seconds);

    StepMetrics m;
    m.step = position.step;
    m.max_steps = max_steps;
    m.loss = loss;
    m.lr = lr;
    m.grad_norm = result.grad_norm;
    m.loss_scale = result.loss_scale;
    m.skipped = result.skipped;
    m.step_seconds = step_seconds;
    m.tokens_per_second = static_cast<double>(tokens_per_step) / step_seconds;
    m.consumed_samples = position.consumed_samples;
    m.exposed_comm_ms = optimizer.take_exposed_comm_ms();  // the loss read-back synchronised the stream
    summary.exposed_comm_ms.push_back(m.exposed_comm_ms);
    if (leader) {
      metrics->step(m);
      write_step_scalars(*tensorboard, m);
    }
    if (verbose) {
      const double eta =
          step_seconds_total / static_cast<double>(steps_this_run) * static_cast<double>(max_steps - position.step);
      // Every log_every_n_steps a line that stays; on a terminal, every other step rewrites the last line.
      const char* clear_line = live_display ? "\r\033[K" : "";
      if (position.step % config.trainer.log_every_n_steps == 0 || position.step == 1) {
        std::printf("%s%s\n", clear_line, format_progress(m, eta).c_str());
      } else if (live_display) {
        std::printf("%s%s", clear_line, format_progress(m, eta).c_str());
      }
      std::fflush(stdout);
    }
    if (config.trainer.val_check_interval > 0 && position.step % config.trainer.val_check_interval == 0) {
      validate(position.step);
    }
    if (every_n > 0 && position.step % every_n == 0) {
      summary.last_checkpoint = checkpoints.save(position, model, optimizer, to_yaml(config), grid);
    }
  }
  if (position.step == max_steps && steps_this_run > 0) {
    if (config.trainer.val_check_interval <= 0 || position.step % config.trainer.val_check_interval != 0) {
      validate(position.step);
    }
    if (config.exp_manager.create_checkpoint_callback && (every_n <= 0 || position.step % every_n != 0)) {
      summary.last_checkpoint = checkpoints.save(position, model, optimizer, to_yaml(config), grid);
    }
  }
  summary.steps_done = position.step;
  const double elapsed = seconds_since(run_start);
  summary.tokens_per_second =
      steps_this_run > 0 ? static_cast<double>(tokens_per_step * steps_this_run) / step_seconds_total : 0.0;
  summary.mean_exposed_comm_ms = mean_after_first(summary.exposed_comm_ms);
  summary.memory = memory.report(world);
  if (leader) {
    RunMetrics run;
    run.steps = steps_this_run;
    run.tokens_per_second = summary.tokens_per_second;
    run.mean_exposed_comm_ms = summary.mean_exposed_comm_ms;
    run.world_size = grid.world_size();
    run.data_parallel_size = dp;
    run.tensor_parallel_size = grid.tp_size();
    run.memory = summary.memory;
    metrics->run_summary(run);
    write_memory_scalars(*tensorboard, position.step, summary.memory);
  }
  if (leader) draw_run_loss_curves(config.run_dir(), verbose);
  if (verbose) {
    std::printf("done: %lld steps in %s, %.0f tokens/s, exposed comm %.1f ms/step (mean after the first step)\n",
                static_cast<long long>(steps_this_run), format_duration(elapsed).c_str(), summary.tokens_per_second,
                summary.mean_exposed_comm_ms);
    std::printf("peak memory per rank: %s\n", format_memory(summary.memory).c_str());
  }
  return summary;
}

}  // namespace adamant::train
