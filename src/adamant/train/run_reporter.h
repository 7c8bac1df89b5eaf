#pragma once
// What a run tells its user, from world rank 0 (on the other ranks every call does nothing): the
// run folder's config.yaml, metrics.jsonl and TensorBoard events, and on the console the set-up
// facts, a progress line per step (rewritten in place on a terminal, kept every
// trainer.log_every_n_steps), validation lines and the closing summary; at the end, the
// loss-curve picture.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adamant/train/memory_report.h"
#include "adamant/train/metrics.h"
#include "adamant/train/tensorboard_writer.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

class RunReporter {
 public:
  // resumed_at_step: the step of the checkpoint the run continues, if any (the logs continue too).
  RunReporter(const TrainConfig& config, bool leader, bool quiet, std::optional<std::int64_t> resumed_at_step);

  void warnings(const std::vector<std::string>& lines) const;
  void resumed(const std::filesystem::path& checkpoint, std::int64_t step) const;
  void set_up(const std::string& description, const MemoryReport& memory) const;
  void step(const StepMetrics& m, double eta_seconds) const;
  void validation(std::int64_t step, double loss) const;
  // After the last step: the run's record, its memory peaks, the picture and the closing lines.
  void finish(const RunMetrics& run, std::int64_t step, double elapsed_seconds) const;

 private:
  const TrainConfig& config_;
  bool leader_;
  bool verbose_;
  bool live_display_;  // rewrite the progress line in place
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace adamant::train
