#pragma once
// The loss curves of a run as a PNG picture (cairo): training loss per step and validation
// loss at its steps, read from the run's metrics.jsonl, with labelled axes, ticks and a legend.
// A step logged twice (steps run again after a resume) keeps its latest value.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace adamant::train {

struct LossCurves {
  std::vector<std::pair<std::int64_t, double>> train;       // (step, loss), by step
  std::vector<std::pair<std::int64_t, double>> validation;  // (step, val_loss), by step
};

// Reads metrics.jsonl; a line that is not JSON names the file and the line.
LossCurves read_loss_curves(const std::filesystem::path& metrics_file);

struct PlotOptions {
  std::string title = "loss";
  bool log_x = false;  // steps on a logarithmic axis
  int width = 960;     // pixels
  int height = 600;
};

// Draws the curves into `png` (written to a temporary name, then renamed). The curves must hold
// at least one point.
void plot_loss_curves(const LossCurves& curves, const std::filesystem::path& png, const PlotOptions& options);

// At the end of a run: RUN_DIR/loss.png from RUN_DIR/metrics.jsonl. A failure to draw is reported
// on stderr and does not fail the run (its checkpoints and metrics are written). With `report`, prints
// where the picture and the TensorBoard files are.
void draw_run_loss_curves(const std::filesystem::path& run_dir, bool report);

}  // namespace adamant::train
