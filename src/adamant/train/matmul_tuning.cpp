#include "adamant/train/matmul_tuning.h"

#include <fmt/format.h>

#include "adamant/core/error.h"
#include "adamant/train/benchmark.h"
#include "adamant/train/trainer.h"

namespace adamant::train {

MatmulTuningReport tune_matmul(const TrainConfig& config, const kernels::MatmulTuningOptions& options,
                               const std::filesystem::path& output, const std::filesystem::path& run_root,
                               MPI_Comm world) {
  int world_size = 1;
  MPI_Comm_size(world, &world_size);
  ADAMANT_CHECK(world_size == 1,
                "tune-matmul runs as one process ({} were started): start it without mpirun -np; the data-parallel "
                "ranks of a run make the same GEMMs and share its table",
                world_size);
  ADAMANT_CHECK(config.trainer.accelerator == "gpu",
                "tune-matmul times the GEMMs of a GPU run; trainer.accelerator is {}: set trainer.accelerator=gpu",
                config.trainer.accelerator);
  // Read first: a malformed table stops the command before a step is run, and is kept.
  kernels::MatmulAlgorithmTable table;
  if (std::filesystem::exists(output)) table = kernels::MatmulAlgorithmTable::read(output);

  // The step only shows which shapes the run makes; any table the config names plays no part
  // (and may not exist yet: it is often the output).
  TrainConfig step_config = benchmark_config(config, BenchmarkOptions{.warmup_steps = 0, .steps = 1}, run_root);
  step_config.trainer.matmul_algorithms.clear();
  TrainOptions train_options;
  train_options.quiet = true;
  train_options.world = world;
  train_options.tune_matmul = options;
  const TrainSummary summary = run_training(step_config, train_options);

  MatmulTuningReport report;
  report.records = summary.matmul_algorithms;
  report.output = output;
  for (const kernels::MatmulAlgorithmRecord& record : report.records) table.set(record);
  table.write(output);
  report.choices_in_file = table.size();
  return report;
}

std::string describe(const MatmulTuningReport& report) {
  std::string text;
  double heuristic_us = 0, chosen_us = 0;
  std::size_t changed = 0;
  for (const kernels::MatmulAlgorithmRecord& r : report.records) {
    const kernels::MatmulShape& s = r.shape;
    const kernels::MatmulAlgorithmConfig& c = r.choice.config;
    const bool other = r.choice.chosen_us < r.choice.heuristic_us;
    changed += other ? 1 : 0;
    heuristic_us += r.choice.heuristic_us;
    chosen_us += r.choice.chosen_us;
    text += fmt::format(
        "  {:>6} x {:>6} x {:>6} op {}{} {} -> {}{}: heuristics {:8.1f} us, chosen {:8.1f} us{} (algorithm {}, tile "
        "{}, stages {}, split-k {}, cluster {})\n",
        s.m, s.n, s.k, s.transa == 0 ? 'N' : 'T', s.transb == 0 ? 'N' : 'T', kernels::matmul_type_name(s.a_type),
        kernels::matmul_type_name(s.c_type), s.epilogue == 1 ? "" : " +bias", r.choice.heuristic_us, r.choice.chosen_us,
        other ? fmt::format(" ({:.1f}% less)", 100.0 * (1.0 - r.choice.chosen_us / r.choice.heuristic_us)) : "", c.id,
        c.tile, c.stages, c.split_k, c.cluster_shape);
  }
  const kernels::MatmulTarget target = report.records.empty() ? kernels::MatmulTarget{} : report.records.front().target;
  text += fmt::format(
      "tune-matmul: {} GEMM shapes on {} (cuBLASLt {}), {} with a faster algorithm than the heuristics' first "
      "answer; one call of each: {:.0f} us -> {:.0f} us ({:.1f}% less)\n"
      "written to {} ({} choices in all); train with trainer.matmul_algorithms={}",
      report.records.size(), target.gpu, target.cublaslt_version, changed, heuristic_us, chosen_us,
      heuristic_us > 0 ? 100.0 * (1.0 - chosen_us / heuristic_us) : 0.0, report.output.string(), report.choices_in_file,
      report.output.string());
  return text;
}

}  // namespace adamant::train
