// adamant plan CONFIG [key=value ...] --gpus N [--gpu-memory GiB] [--cpu]: the tensor x pipeline x data-parallel
// layouts of a config on N GPUs that fit their memory, fastest first (train/layout_plan.h).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "adamant/core/cuda_runtime.h"
#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/tools/commands.h"
#include "adamant/train/layout_plan.h"
#include "adamant/train/memory_budget.h"
#include "adamant/train/plan_report.h"
#include "adamant/train/train_config.h"

namespace adamant::tools {

namespace {

struct PlanArgs {
  std::string config;
  std::vector<std::string> overrides;
  int gpus = 0;
  double gpu_memory_gib = 0;  // 0: the visible GPU's, or the host's share with --cpu
  bool cpu = false;
};

double memory_per_rank(const PlanArgs& args) {
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  if (args.gpu_memory_gib > 0) return args.gpu_memory_gib * GiB;
  if (args.cpu) return train::host_memory_bytes() / args.gpus;
  ADAMANT_CHECK(cuda_device_count() > 0,
                "no GPU is visible to size the plan with: give --gpu-memory GiB (80 for an H100, 141 for an H200), "
                "or --cpu to plan CPU ranks on this host");
  return static_cast<double>(cuda::device_memory_total(0));
}

void run_plan(const PlanArgs& args) {
  ADAMANT_CHECK(std::filesystem::is_regular_file(args.config),
                "CONFIG {}: no such file; give a training config such as configs/gpt3-126m.yaml", args.config);
  ADAMANT_CHECK(args.gpus >= 1, "--gpus {}: give the number of GPUs (or CPU ranks with --cpu) to plan for, 1 or more",
                args.gpus);
  ADAMANT_CHECK(args.gpu_memory_gib >= 0 && std::isfinite(args.gpu_memory_gib),
                "--gpu-memory {}: give each GPU's memory in GiB, e.g. 80 or 141", args.gpu_memory_gib);
  const train::TrainConfig config = train::load_train_config(args.config, args.overrides);
  ADAMANT_CHECK(args.cpu || train::weight_dtype_of(config) == DType::bf16,
                "{}: GPUs train with bf16 weights; set model.megatron_amp_O2=true and trainer.precision=bf16, or "
                "plan CPU ranks with --cpu",
                args.config);
  const data::BpeTokenizer tokenizer =
      data::BpeTokenizer::load(config.data.tokenizer.vocab_file, config.data.tokenizer.merge_file);
  train::PlanRequest request;
  request.config_name = args.config;
  request.gpus = args.gpus;
  request.gpu = !args.cpu;
  request.memory_per_rank = memory_per_rank(args);
  const auto plans = train::plan_layouts(config, static_cast<int>(tokenizer.vocab_size()), args.gpus,
                                         args.cpu ? Device::cpu() : Device::cuda(0), request.memory_per_rank);
  const train::PlanReport report = train::plan_report(config, request, plans);
  std::fputs(report.text.c_str(), stdout);
  std::fflush(stdout);
  ADAMANT_CHECK(report.fitting > 0, "no layout of {} {} fits {}; see the keys to change above", args.gpus,
                args.cpu ? "CPU ranks" : "GPUs", train::memory_text(request.memory_per_rank));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "plan",
      "List the tensor x pipeline x data-parallel layouts of a config on N GPUs that fit their memory, fastest "
      "first: memory per GPU (from the buffers the run allocates), pipeline bubble, communication per step and the "
      "overrides that select each");
  auto args = std::make_shared<PlanArgs>();
  cmd->add_option("config", args->config, "YAML config, e.g. configs/gpt3-1.3b.yaml")->required();
  cmd->add_option("overrides", args->overrides, "key=value overrides, e.g. model.micro_batch_size=2");
  cmd->add_option("--gpus", args->gpus, "GPUs (or CPU ranks with --cpu) in the job")->required();
  cmd->add_option("--gpu-memory", args->gpu_memory_gib,
                  "memory per GPU in GiB (default: the visible GPU's; with --cpu the host's memory over the ranks)");
  cmd->add_flag("--cpu", args->cpu, "plan CPU ranks (trainer.accelerator=cpu): fp32 activations on the host");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace adamant::tools
