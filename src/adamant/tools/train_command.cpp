// adamant train CONFIG [key=value ...]
#include <cstdio>
#include <string>
#include <vector>

#include "adamant/comm/mpi_session.h"
#include "adamant/tools/commands.h"
#include "adamant/train/train_config.h"
#include "adamant/train/trainer.h"

namespace adamant::tools {

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train",
                                 "Train a GPT model from a YAML config (NeMo key names); run under mpirun "
                                 "for data parallelism");
  struct Args {
    std::string config;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "YAML config, e.g. configs/gpt3-tiny.yaml")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("overrides", args->overrides, "key=value overrides, e.g. model.optim.lr=3e-4 trainer.max_steps=100");
  cmd->callback([args] {
    comm::MpiSession mpi;
    const train::TrainConfig config = train::load_train_config(args->config, args->overrides);
    if (const std::string warning = train::ignored_keys_warning(config); mpi.world_rank() == 0 && !warning.empty()) {
      std::fprintf(stderr, "adamant: %s\n", warning.c_str());
    }
    train::run_training(config);
  });
}

}  // namespace adamant::tools
