#include "adamant/train/run_reporter.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "adamant/core/atomic_file.h"
#include "adamant/core/file_write.h"
#include "adamant/train/loss_plot.h"

namespace adamant::train {

RunReporter::RunReporter(const TrainConfig& config, bool leader, bool quiet,
                         std::optional<std::int64_t> resumed_at_step)
    : config_(config),
      leader_(leader),
      verbose_(leader && !quiet),
      // Under mpirun a rank's stdout is a pseudo-terminal even when mpirun's own output goes to a
      // file, so the rewritten status line is kept for runs started without mpirun.
      live_display_(verbose_ && ::isatty(::fileno(stdout)) != 0 && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
  if (!leader_) return;
  create_folder(config.run_dir(), "run (exp_manager.exp_dir/exp_manager.name)");
  write_file_atomically(config.run_dir() / "config.yaml", to_yaml(config));
  metrics_ = std::make_unique<MetricsLog>(config.run_dir() / "metrics.jsonl", resumed_at_step);
  tensorboard_ = std::make_unique<TensorBoardWriter>(config.run_dir(), resumed_at_step.value_or(0));
}

void RunReporter::warnings(const std::vector<std::string>& lines) const {
  if (!leader_) return;
  for (const auto& warning : lines) std::fprintf(stderr, "warning: %s\n", warning.c_str());
}

void RunReporter::resumed(const std::filesystem::path& checkpoint, std::int64_t step) const {
  if (!verbose_) return;
  std::printf("resumed from %s (step %lld)\n", checkpoint.string().c_str(), static_cast<long long>(step));
}

void RunReporter::set_up(const std::string& description, const MemoryReport& memory) const {
  if (!verbose_) return;
  std::printf("%s", description.c_str());
  std::printf("memory per rank after set-up: %s\n", format_memory(memory).c_str());
  std::fflush(stdout);  // start-up facts show before the first (possibly long) step
}

void RunReporter::step(const StepMetrics& m, double eta_seconds) const {
  if (!leader_) return;
  metrics_->step(m);
  write_step_scalars(*tensorboard_, m);
  if (!verbose_) return;
  // Every log_every_n_steps a line that stays; on a terminal, every other step rewrites the last line.
  const char* clear_line = live_display_ ? "\r\033[K" : "";
  if (m.step % config_.trainer.log_every_n_steps == 0 || m.step == 1) {
    std::printf("%s%s\n", clear_line, format_progress(m, eta_seconds).c_str());
  } else if (live_display_) {
    std::printf("%s%s", clear_line, format_progress(m, eta_seconds).c_str());
  }
  std::fflush(stdout);
}

void RunReporter::validation(std::int64_t step, double loss) const {
  if (!leader_) return;
  metrics_->validation(step, loss);
  tensorboard_->scalar("val_loss", step, loss);
  if (!verbose_) return;
  std::printf("%svalidation | step %lld | val loss %.4f\n", live_display_ ? "\r\033[K" : "",
              static_cast<long long>(step), loss);
  std::fflush(stdout);
}

void RunReporter::finish(const RunMetrics& run, std::int64_t step, double elapsed_seconds) const {
  if (!leader_) return;
  metrics_->run_summary(run);
  write_memory_scalars(*tensorboard_, step, run.memory);
  draw_run_loss_curves(config_.run_dir(), verbose_);
  if (!verbose_) return;
  std::printf("done: %lld steps in %s, %.0f tokens/s, exposed comm %.1f ms/step (mean after the first step)\n",
              static_cast<long long>(run.steps), format_duration(elapsed_seconds).c_str(), run.tokens_per_second,
              run.mean_exposed_comm_ms);
  std::printf("peak memory per rank: %s\n", format_memory(run.memory).c_str());
}

}  // namespace adamant::train
