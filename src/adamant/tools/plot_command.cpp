// adamant plot RUN_DIR [--log-x] [--output FILE]: the run's loss curves as a PNG picture.
#include <cstdio>
#include <string>

#include "adamant/tools/commands.h"
#include "adamant/train/loss_plot.h"

namespace adamant::tools {

void add_plot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plot", "Draw a run's train and validation loss into RUN_DIR/loss.png");
  struct Args {
    std::string run_dir;
    std::string output;
    bool log_x = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("run_dir", args->run_dir, "run folder holding metrics.jsonl, e.g. runs/gpt3-tiny")->required();
  cmd->add_option("--output", args->output, "picture to write (default: RUN_DIR/loss.png)");
  cmd->add_flag("--log-x", args->log_x, "steps on a logarithmic axis");
  cmd->callback([args] {
    const std::filesystem::path run_dir = args->run_dir;
    const std::filesystem::path png = args->output.empty() ? run_dir / "loss.png" : std::filesystem::path(args->output);
    train::PlotOptions options;
    options.log_x = args->log_x;
    options.title = std::filesystem::absolute(run_dir).lexically_normal().filename().string() + ": loss";
    train::plot_loss_curves(train::read_loss_curves(run_dir / "metrics.jsonl"), png, options);
    std::printf("%s\n", png.string().c_str());
  });
}

}  // namespace adamant::tools
