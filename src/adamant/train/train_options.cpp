#include "adamant/train/train_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "adamant/core/error.h"

namespace adamant::train {

void TrainerOptions::validate(const KeyOrigin& origin) const {
  const OptionChecks check(origin);
  check.one_of("trainer.accelerator", accelerator, {"cpu", "gpu"}, "accelerator", "use cpu or gpu");
  if (devices != kAutoDevices && devices < 1) {
    fail(
        "trainer.devices must be >= 1 or -1 (got {}){}; it is the number of ranks (GPUs) per node, and -1 or "
        "\"auto\" takes however many the launcher started",
        devices, check.where("trainer.devices"));
  }
  check.at_least("trainer.num_nodes", num_nodes, 1, "the number of hosts the job runs on");
  check.at_least("trainer.max_steps", max_steps, 1, "the number of optimizer steps to train, e.g. 1000");
  check.at_least("trainer.val_check_interval", val_check_interval, 1, "the number of steps between validations");
  check.at_least("trainer.limit_val_batches", limit_val_batches, 0, "the number of validation batches (0: none)");
  check.at_least("trainer.log_every_n_steps", log_every_n_steps, 1, "the number of steps between log lines");
  check.at_least("trainer.collective_timeout_s", collective_timeout_s, 0.0,
                 "the seconds a rank may wait for a collective before the job ends (0: no limit)");
  if (seed < 0 || seed > 0xffffffffLL) {
    fail("model.seed={} is out of range{}; the data shuffle takes a seed in [0, 4294967295]", seed,
         check.where("model.seed"));
  }
}

void TrainerOptions::check_launch(int world_size, const comm::NodeTopology& topology) const {
  const int hosts = topology.num_nodes();
  std::vector<int> ranks_per_host(static_cast<std::size_t>(hosts), 0);
  for (const int host : topology.node_of_rank()) ++ranks_per_host[static_cast<std::size_t>(host)];
  const std::string layout =
      fmt::format("{} MPI rank(s) on {} host(s) ({} per host)", world_size, hosts, fmt::join(ranks_per_host, ", "));
  if (devices != kAutoDevices && devices * num_nodes != world_size) {
    fail(
        "trainer.devices ({}) x trainer.num_nodes ({}) = {} ranks, but the launcher started {}; set "
        "trainer.devices to the ranks per host and trainer.num_nodes to the hosts, or trainer.devices=-1 to take "
        "the launcher's ranks per host",
        devices, num_nodes, devices * num_nodes, layout);
  }
  if (num_nodes != hosts) {
    fail("trainer.num_nodes is {}, but the launcher started {}; set trainer.num_nodes={}", num_nodes, layout, hosts);
  }
  if (devices == kAutoDevices || allow_irregular_node_layout) return;
  for (int host = 0; host < hosts; ++host) {
    const int ranks = ranks_per_host[static_cast<std::size_t>(host)];
    if (ranks != devices) {
      fail(
          "trainer.devices is {}, but host {} runs {} rank(s) of this job ({}); start {} rank(s) on every host, or "
          "set trainer.devices=-1 with trainer.allow_irregular_node_layout=true to accept unequal hosts",
          devices, topology.node_names()[static_cast<std::size_t>(host)], ranks, layout, devices);
    }
  }
}

void ExpManagerOptions::validate(const KeyOrigin& origin) const {
  const OptionChecks check(origin);
  if (exp_dir.empty()) {
    fail("exp_manager.exp_dir is empty{}; give the folder that holds the runs, e.g. runs",
         check.where("exp_manager.exp_dir"));
  }
  if (name.empty())
    fail("exp_manager.name is empty{}; give the run's name, e.g. gpt3_126m", check.where("exp_manager.name"));
  const auto& k = checkpoint_callback_params;
  check.at_least("exp_manager.checkpoint_callback_params.every_n_train_steps", k.every_n_train_steps, 0,
                 "the steps between checkpoints (0: only at the end)");
  if (k.save_top_k == 0 || k.save_top_k < -1) {
    fail(
        "exp_manager.checkpoint_callback_params.save_top_k must be -1 (keep all) or >= 1 (got {}){}; to write no "
        "checkpoints set exp_manager.create_checkpoint_callback: false",
        k.save_top_k, check.where("exp_manager.checkpoint_callback_params.save_top_k"));
  }
}

}  // namespace adamant::train
