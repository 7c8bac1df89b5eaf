#include "adamant/train/trainer.h"

#include <algorithm>
#include <chrono>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/process_grid.h"
#include "adamant/core/error.h"
#include "adamant/data/data_loader.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/param_layout.h"
#include "adamant/optim/lr_schedule.h"
#include "adamant/optim/optimizer.h"
#include "adamant/train/checkpoint.h"
#include "adamant/train/checkpoint_roles.h"
#include "adamant/train/memory_report.h"
#include "adamant/train/metrics.h"
#include "adamant/train/run_checkpoints.h"
#include "adamant/train/run_reporter.h"
#include "adamant/train/run_setup.h"
#include "adamant/train/step_batches.h"

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

// The mean loss of micro-batches over the data-parallel ranks, from the sum the last pipeline stage
// holds (sent to the other stages first, so that every rank reports the same).
double mean_loss(comm::ProcessGrid& grid, double last_stage_sum, double micro_batches) {
  double sum = last_stage_sum;
  if (grid.pp_size() > 1) {
    grid.pipeline_group().broadcast(Tensor::flat(&sum, DType::f64, Device::cpu(), 1), grid.pp_size() - 1);
  }
  return group_mean(grid.data_parallel_group(), sum, micro_batches);
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

// When a run validates and saves: every trainer.val_check_interval and every_n_train_steps steps,
// and at the last step (trainer.max_steps) whatever the intervals, once.
struct RunCadence {
  std::int64_t max_steps = 0;
  std::int64_t val_interval = 0;         // <= 0: only at the end
  std::int64_t checkpoint_interval = 0;  // <= 0: only at the end
  bool checkpoints = false;

  explicit RunCadence(const TrainConfig& config)
      : max_steps(config.trainer.max_steps),
        val_interval(config.trainer.val_check_interval),
        checkpoint_interval(config.exp_manager.create_checkpoint_callback
                                ? config.exp_manager.checkpoint_callback_params.every_n_train_steps
                                : 0),
        checkpoints(config.exp_manager.create_checkpoint_callback) {}
  bool validate_after(std::int64_t step) const { return val_interval > 0 && step % val_interval == 0; }
  bool save_after(std::int64_t step) const { return checkpoint_interval > 0 && step % checkpoint_interval == 0; }
  bool final_validation(std::int64_t step) const { return step == max_steps && !validate_after(step); }
  bool final_save(std::int64_t step) const { return checkpoints && step == max_steps && !save_after(step); }
};

}  // namespace

TrainSummary run_training(const TrainConfig& config, const TrainOptions& options) {
  comm::MpiCommunicator world(options.world);
  RunSetup setup(config, world);
  comm::ProcessGrid& grid = setup.grid();
  model::GptModel& model = setup.model();
  optim::Optimizer& optimizer = setup.optimizer();
  PipelineRunner& pipeline = setup.pipeline();
  const std::int64_t tokens_per_step =
      static_cast<std::int64_t>(config.data.global_batch_size) * config.model.seq_length;

  if (config.exp_manager.checkpoint_callback_params.node_local && config.exp_manager.resume_if_exists) {
    // On node-local disks every host must hold the same newest checkpoint (a save cut off
    // before every host renamed its folder leaves them apart): refused on every rank.
    agreed_latest_checkpoint(CheckpointStore(config.run_dir() / "checkpoints", -1), grid.world());
  }
  const RunStart start = prepare_run_start(config, grid.world());
  CheckpointStore checkpoints(config.run_dir() / "checkpoints",
                              config.exp_manager.checkpoint_callback_params.save_top_k, start.run_id,
                              config.exp_manager.checkpoint_callback_params.node_local);
  TrainingPosition position;
  if (start.checkpoint) {
    position = load_checkpoint(*start.checkpoint, model, &optimizer);
    check_same_global_batch(position, *start.checkpoint, config.data.global_batch_size);
  }
  const RunReporter report(config, grid.world_rank() == 0, options.quiet,
                           start.checkpoint ? std::optional<std::int64_t>(position.step) : std::nullopt);
  report.warnings(start.warnings);
  if (start.checkpoint) report.resumed(*start.checkpoint, position.step);
  MemoryWatch memory(model.device());
  report.set_up(setup.describe(), memory.report(world));

  data::DataLoader& train_loader = setup.train_loader();
  train_loader.reset(position.consumed_samples);
  StepBatches step_batches(model.config().vocab_size, setup.data_files());
  const int micro_batches = train_loader.num_micro_batches();
  const double grad_scale = 1.0 / (static_cast<double>(micro_batches) * grid.dp_size());
  const optim::LrSchedule schedule = setup.lr_schedule();
  // Reported only where a report starts work (a recorded backward pauses for each report).
  const model::GradReadyFn on_grad_ready = !optimizer.overlaps_grad_sync()
                                               ? model::GradReadyFn{}
                                               : [&optimizer](std::size_t index) { optimizer.on_grad_ready(index); };
  // With overlap_param_sync the first forward of a step waits for each bucket's Adam (and all-gather)
  // right before it reads the bucket's first weight; otherwise for all of them before it starts.
  const model::WeightNeeds on_weight_needed =
      !optimizer.overlaps_param_sync()
          ? model::WeightNeeds{}
          : model::WeightNeeds{[&optimizer](std::size_t index) { optimizer.wait_for_param(index); },
                               [&optimizer](std::size_t index) { return optimizer.weight_pending(index); }};
  const RunCadence cadence(config);

  TrainSummary summary;
  summary.steps_done = position.step;
  summary.model_parameters = model::whole_model_parameters(model.config());
  summary.model_flops_per_token = model::model_flops_per_token(model.config());
  const FlopsReference& flops = setup.flops_reference();
  summary.gpu_name = flops.gpu_name;
  summary.peak_flops_per_gpu = flops.peak_flops;
  const std::int64_t last_step =
      options.stop_after_step ? std::min(cadence.max_steps, *options.stop_after_step) : cadence.max_steps;
  const auto run_start = Clock::now();
  std::int64_t steps_this_run = 0;
  double step_seconds_total = 0;

  auto validate = [&](std::int64_t step) {
    data::DataLoader* loader = setup.valid_loader();
    if (loader == nullptr) return;
    // The forwards read every weight: with overlap_param_sync the last step's all-gathers may
    // still be writing them.
    optimizer.wait_for_params();
    loader->reset(0);
    double sum = 0, count = 0;
    while (loader->has_next()) {
      const auto batches = step_batches.next(*loader);
      sum += pipeline.evaluate(batches);
      count += static_cast<double>(batches.size());
    }
    const double val = mean_loss(grid, sum, count);
    summary.val_losses.emplace_back(step, val);
    report.validation(step, val);
  };
  auto save = [&] { summary.last_checkpoint = checkpoints.save(position, model, optimizer, to_yaml(config), grid); };

  // A first validation before any update shows where training starts (as NeMo's sanity check does).
  if (position.step == 0 && last_step > 0 && cadence.val_interval > 0) validate(0);
  optimizer.take_exposed_comm_ms();  // waits of set-up or of loading a checkpoint are no step's
  while (position.step < last_step) {
    ADAMANT_CHECK(train_loader.has_next(),
                  "the training data ran out at step {}; the dataset is smaller than "
                  "trainer.max_steps x model.global_batch_size samples",
                  position.step);
    const auto step_start = Clock::now();
    const double lr = optim::learning_rate(schedule, position.step);
    if (!on_weight_needed) optimizer.wait_for_params();
    pipeline.train_step(step_batches.next(train_loader), static_cast<float>(optimizer.loss_scale()), on_grad_ready,
                        on_weight_needed);
    const optim::StepResult result = optimizer.step(lr, grad_scale);
    // Read once the optimizer's work is issued: the GPU goes from the backward into it directly.
    const double loss = mean_loss(grid, pipeline.take_loss_sum(), micro_batches);
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
    m.max_steps = cadence.max_steps;
    m.loss = loss;
    m.lr = lr;
    m.grad_norm = result.grad_norm;
    m.loss_scale = result.loss_scale;
    m.skipped = result.skipped;
    m.step_seconds = step_seconds;
    m.tokens_per_second = static_cast<double>(tokens_per_step) / step_seconds;
    m.consumed_samples = position.consumed_samples;
    if (flops.per_gpu) {
      m.model_flops_per_gpu = m.tokens_per_second / grid.world_size() * summary.model_flops_per_token;
      m.peak_flops_per_gpu = flops.peak_flops;
    }
    m.exposed_comm_ms = optimizer.take_exposed_comm_ms();  // the grad-norm read synchronised the stream
    summary.exposed_comm_ms.push_back(m.exposed_comm_ms);
    const double eta = step_seconds_total / static_cast<double>(steps_this_run) *
                       static_cast<double>(cadence.max_steps - position.step);
    report.step(m, eta);
    if (cadence.validate_after(position.step)) validate(position.step);
    if (cadence.save_after(position.step)) save();
  }
  if (steps_this_run > 0 && cadence.final_validation(position.step)) validate(position.step);
  if (steps_this_run > 0 && cadence.final_save(position.step)) save();
  summary.steps_done = position.step;
  if (options.tune_matmul)
    summary.matmul_algorithms = kernels::tune_matmul_algorithms(model.workspace(), *options.tune_matmul);
  summary.tokens_per_second =
      steps_this_run > 0 ? static_cast<double>(tokens_per_step * steps_this_run) / step_seconds_total : 0.0;
  summary.mean_exposed_comm_ms = mean_after_first(summary.exposed_comm_ms);
  summary.memory = memory.report(world);
  RunMetrics run;
  run.steps = steps_this_run;
  run.tokens_per_second = summary.tokens_per_second;
  run.mean_exposed_comm_ms = summary.mean_exposed_comm_ms;
  run.world_size = grid.world_size();
  run.data_parallel_size = grid.dp_size();
  run.tensor_parallel_size = grid.tp_size();
  run.pipeline_parallel_size = grid.pp_size();
  run.memory = summary.memory;
  run.model_flops_per_token = summary.model_flops_per_token;
  run.gpu_name = summary.gpu_name;
  run.peak_flops_per_gpu = summary.peak_flops_per_gpu;
  report.finish(run, position.step, seconds_since(run_start));
  return summary;
}

}  // namespace adamant::train
