#pragma once
// Each subcommand registers itself on the CLI app; its callback runs the command.
#include <CLI/CLI.hpp>

namespace adamant::tools {

void add_train_command(CLI::App& app);
void add_preprocess_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_config_keys_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_tune_matmul_command(CLI::App& app);

}  // namespace adamant::tools
