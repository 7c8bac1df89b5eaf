// The `adamant` command: train, preprocess, generate, bench, export, import, plot, config-keys, plan.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "adamant/core/error.h"
#include "adamant/tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Adamant: GPT-3 training with a ZeRO-2 distributed fused Adam optimizer"};
  app.require_subcommand(1);
  adamant::tools::add_train_command(app);
  adamant::tools::add_preprocess_command(app);
  adamant::tools::add_generate_command(app);
  adamant::tools::add_bench_command(app);
  adamant::tools::add_export_command(app);
  adamant::tools::add_import_command(app);
  adamant::tools::add_plot_command(app);
  adamant::tools::add_config_keys_command(app);
  adamant::tools::add_plan_command(app);
  adamant::tools::add_tune_matmul_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const adamant::Error& e) {
    std::fprintf(stderr, "adamant: error: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave (or a folder under it) cannot be created, read or written.
    std::fprintf(stderr, "adamant: error: %s; check that the path exists, is not under a file and is writable\n",
                 e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "adamant: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
