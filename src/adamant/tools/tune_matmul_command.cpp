// adamant tune-matmul CONFIG [key=value ...] --output FILE [--candidates N] [--repetitions N] [--min-gain F]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "adamant/comm/mpi_session.h"
#include "adamant/tools/commands.h"
#include "adamant/train/matmul_tuning.h"
#include "adamant/train/train_config.h"

namespace adamant::tools {

void add_tune_matmul_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tune-matmul",
      "Record the fastest cuBLASLt algorithm of each GEMM of a config's training step on this GPU: one step, "
      "then every candidate timed; the choices go into a table that trainer.matmul_algorithms reads "
      "(runs stay bitwise repeatable: the table, not timing, picks the algorithm)");
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    std::string output;
    kernels::MatmulTuningOptions options;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "YAML config, e.g. configs/gpt3-126m.yaml")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("overrides", args->overrides, "key=value overrides, e.g. model.micro_batch_size=4");
  cmd->add_option("--output", args->output,
                  "the table to write; an existing one keeps its other choices (other GPUs, shapes)")
      ->required();
  cmd->add_option("--candidates", args->options.candidates, "cuBLASLt's heuristic answers timed per GEMM")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--repetitions", args->options.repetitions, "timed runs per candidate (the median counts)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--min-gain", args->options.min_gain,
                  "a candidate replaces the heuristics' first answer only when this fraction faster")
      ->check(CLI::Range(0.0, 0.99));
  cmd->callback([args] {
    comm::MpiSession mpi;
    const auto run_root =
        std::filesystem::temp_directory_path() / ("adamant-tune-matmul-" + std::to_string(::getpid()));
    const train::MatmulTuningReport report = train::tune_matmul(train::load_train_config(args->config, args->overrides),
                                                                args->options, args->output, run_root, MPI_COMM_WORLD);
    std::filesystem::remove_all(run_root);
    std::printf("%s\n", train::describe(report).c_str());
  });
}

}  // namespace adamant::tools
