#pragma once
// Everything a training run is made of, built once from the config in the order
// the pieces depend on each other: process grid and device, tokenizer and data,
// the optimizer's layout, the model allocated to it, the optimizer attached.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "adamant/comm/mpi_communicator.h"
#include "adamant/comm/process_grid.h"
#include "adamant/core/stream.h"
#include "adamant/data/data_loader.h"
#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/model/gpt_model.h"
#include "adamant/optim/lr_schedule.h"
#include "adamant/optim/optimizer.h"
#include "adamant/train/gpu_peak.h"
#include "adamant/train/pipeline_runner.h"
#include "adamant/train/train_config.h"

namespace adamant::train {

// The model of the config with the tokenizer's vocabulary, validated.
model::GptConfig gpt_config_of(const TrainConfig& config, int vocab_size);
// The GPU for this rank: its node-local rank's (comm::gpu_for_local_rank), or the CPU.
Device device_of(const TrainConfig& config, const comm::NodeTopology& topology);
comm::GridOptions grid_options_of(const TrainConfig& config);
model::MicroBatch to_model_batch(const data::MicroBatch& batch);

class RunSetup {
 public:
  // Collective over `world`.
  RunSetup(const TrainConfig& config, const comm::MpiCommunicator& world);

  comm::ProcessGrid& grid() { return grid_; }
  model::GptModel& model() { return *model_; }
  // This stage's passes of each step (the plain micro-batch loop without pipeline stages).
  PipelineRunner& pipeline() { return *pipeline_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  data::DataLoader& train_loader() { return *train_loader_; }
  data::DataLoader* valid_loader() { return valid_loader_.get(); }
  const std::vector<std::filesystem::path>& data_files() const { return data_files_; }
  // What the run measures its model FLOPs against (its GPU's name and datasheet peak), read once.
  const FlopsReference& flops_reference() const { return flops_reference_; }
  optim::LrSchedule lr_schedule() const;
  // A few lines: model size, parallelism, optimizer and the memory per rank against the formula of
  // docs/distributed_fused_adam.md, "Memory".
  std::string describe() const;

 private:
  // A line naming the recorded matmul algorithms the run uses; empty without a table.
  std::string describe_matmul_algorithms() const;
  // A line on the recorded passes (model.enable_cuda_graph); empty when they are off.
  std::string describe_recorded_passes() const;
  std::string device_name() const;  // "cuda:0 (NVIDIA H200)", or "cpu"

  const TrainConfig& config_;
  comm::ProcessGrid grid_;
  Device device_;
  FlopsReference flops_reference_;
  Stream compute_stream_;
  std::unique_ptr<comm::Communicator> dp_device_comm_;
  std::unique_ptr<comm::Communicator> tp_device_comm_;  // null without tensor parallelism
  // Pipeline stages only: activations, their gradients (and the grad norm), the tied embedding's sum.
  std::unique_ptr<comm::Communicator> pp_activation_comm_;
  std::unique_ptr<comm::Communicator> pp_gradient_comm_;
  std::unique_ptr<comm::Communicator> embedding_comm_;
  std::vector<std::filesystem::path> data_files_;
  std::unique_ptr<data::DataLoader> train_loader_;
  std::unique_ptr<data::DataLoader> valid_loader_;
  std::shared_ptr<const kernels::MatmulAlgorithmTable> matmul_algorithms_;  // trainer.matmul_algorithms; or null
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<model::GptModel> model_;
  std::unique_ptr<PipelineRunner> pipeline_;
};

}  // namespace adamant::train
