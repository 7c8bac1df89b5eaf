#pragma once
// The keys the trainer itself owns, with their defaults and checks: Lightning's
// trainer section, the run's seed and starting weights, and NeMo's exp_manager
// (run folder, resuming, checkpoints). The training config maps its YAML paths
// onto these fields (config_fields.cpp).
#include <cstdint>
#include <filesystem>
#include <string>

#include "adamant/comm/node_topology.h"
#include "adamant/core/dtype.h"
#include "adamant/core/option_checks.h"

namespace adamant::train {

struct TrainerOptions {             // trainer
  std::string accelerator = "cpu";  // cpu | gpu (one GPU per MPI rank, by node-local rank)
  // Ranks (GPUs with accelerator gpu) per node, as Lightning's devices; kAutoDevices (-1, "auto"):
  // however many ranks the launcher started on each node.
  int devices = kAutoDevices;
  int num_nodes = 1;              // hosts of the job
  DType precision = DType::bf16;  // 32 | bf16 | 16 (and NeMo's bf16-mixed, 16-mixed)
  int max_steps = 100;
  int val_check_interval = 50;
  int limit_val_batches = 10;
  int log_every_n_steps = 1;
  double collective_timeout_s = 1800.0;      // a collective wait longer than this ends the job; 0: no limit
  bool allow_irregular_node_layout = false;  // tensor-parallel groups across hosts, unequal ranks per host
  // A table of recorded cuBLASLt algorithms (kernels/matmul_algorithms.h); empty: the heuristics choose.
  std::filesystem::path matmul_algorithms;
  std::int64_t seed = 1234;  // model.seed: weights, data shuffling, dropout
  // model.restore_from_path: a Hugging Face GPT-2 folder or an Adamant checkpoint whose weights start the
  // run (fine-tuning); empty: random init. A checkpoint found by exp_manager.resume_if_exists wins.
  std::filesystem::path restore_from_path;

  static constexpr int kAutoDevices = -1;

  bool operator==(const TrainerOptions&) const = default;

  void validate(const KeyOrigin& origin = {}) const;
  // NeMo's launch check: devices per node x num_nodes ranks. Throws, on every rank alike, naming
  // trainer.devices, trainer.num_nodes and what the launcher started (`topology` covers `world_size` ranks).
  void check_launch(int world_size, const comm::NodeTopology& topology) const;
};

struct CheckpointOptions {      // exp_manager.checkpoint_callback_params
  int every_n_train_steps = 0;  // 0: only at the end
  int save_top_k = 1;           // newest checkpoints kept (-1: all)
  bool node_local = false;      // exp_dir is on each host's own disk (docs/multinode.md)

  bool operator==(const CheckpointOptions&) const = default;
};

struct ExpManagerOptions {  // exp_manager
  std::filesystem::path exp_dir = "runs";
  std::string name = "adamant_gpt";
  bool resume_if_exists = true;
  // A checkpoint folder to continue from (NeMo's key); empty: none. It takes precedence over resume_if_exists.
  std::filesystem::path resume_from_checkpoint;
  // A fresh run in a folder that holds another run's checkpoints deletes them instead of refusing to start.
  bool overwrite_existing_run = false;
  bool create_checkpoint_callback = true;
  CheckpointOptions checkpoint_callback_params;

  bool operator==(const ExpManagerOptions&) const = default;

  void validate(const KeyOrigin& origin = {}) const;
};

}  // namespace adamant::train
