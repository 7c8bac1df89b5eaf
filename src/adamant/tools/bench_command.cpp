// adamant bench CONFIG [key=value ...] [--steps N] [--warmup N] [--json FILE]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/mpi_session.h"
#include "adamant/core/error.h"
#include "adamant/tools/commands.h"
#include "adamant/train/benchmark.h"
#include "adamant/train/train_config.h"

namespace adamant::tools {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Measure training throughput of a config: a short run (no validation, checkpoints or resume) timed "
      "step by step; prints tokens/s, exposed communication, peak memory per rank and, on GPUs, MFU");
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
    train::BenchmarkOptions options;
    double peak_tflops = 0.0;  // 0: the GPU's datasheet figure (train/gpu_peak.h)
    std::string json;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "YAML config, e.g. configs/gpt3-1.3b.yaml")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("overrides", args->overrides, "key=value overrides, e.g. model.micro_batch_size=4");
  cmd->add_option("--steps", args->options.steps, "timed steps")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", args->options.warmup_steps, "untimed steps first")->check(CLI::Range(0, 1000000));
  cmd->add_option("--peak-tflops", args->peak_tflops,
                  "peak dense bf16 TFLOP/s per GPU, for the MFU (default: the GPU's datasheet figure, e.g. H200 989, "
                  "A100 312)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", args->json, "also write the figures as JSON to this file");
  cmd->callback([args] {
    comm::MpiSession mpi;
    comm::MpiCommunicator world(MPI_COMM_WORLD);
    // One scratch run folder for all ranks, named after rank 0's process, removed at the end.
    long pid = static_cast<long>(::getpid());
    world.broadcast(Tensor::flat(&pid, DType::i64, Device::cpu(), 1), 0);
    const auto run_root = std::filesystem::temp_directory_path() / ("adamant-bench-" + std::to_string(pid));
    args->options.peak_flops = args->peak_tflops * 1e12;
    const train::TrainConfig config =
        train::benchmark_config(train::load_train_config(args->config, args->overrides), args->options, run_root);
    train::TrainOptions quiet;
    quiet.quiet = true;
    const train::BenchmarkResult result = train::run_benchmark(config, args->options, quiet);
    world.barrier();
    if (mpi.world_rank() != 0) return;
    std::filesystem::remove_all(run_root);
    std::printf("%s\n", train::describe(result).c_str());
    if (!args->json.empty()) {
      std::ofstream out(args->json);
      out << train::to_json(result) << "\n";
      ADAMANT_CHECK(out.good(), "--json {}: cannot write the file; check the folder exists and is writable",
                    args->json);
    }
  });
}

}  // namespace adamant::tools
