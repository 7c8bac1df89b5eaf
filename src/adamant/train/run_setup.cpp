#include "adamant/train/run_setup.h"

#include <fmt/format.h>

#include <exception>

#include "adamant/comm/mpi_session.h"
#include "adamant/comm/placement.h"
#include "adamant/core/cuda_runtime.h"
#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/data/gpt_datasets.h"
#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/train/hf_gpt2_folder.h"
#include "adamant/train/memory_budget.h"

namespace adamant::train {

model::GptConfig gpt_config_of(const TrainConfig& config, int vocab_size) {
  model::GptConfig gpt = config.model;
  gpt.vocab_size = vocab_size;
  gpt.validate();
  return gpt;
}

Device device_of(const TrainConfig& config, const comm::NodeTopology& topology) {
  if (config.trainer.accelerator == "cpu") return Device::cpu();
  const int gpus = cuda_device_count();
  ADAMANT_CHECK(gpus > 0,
                "trainer.accelerator is '{}' but no GPU is visible to this build; set trainer.accelerator=cpu",
                config.trainer.accelerator);
  return Device::cuda(
      comm::gpu_for_local_rank(topology.local_rank(), topology.local_size(), gpus, topology.host_name()));
}

comm::GridOptions grid_options_of(const TrainConfig& config) {
  comm::GridOptions options;
  options.allow_irregular_node_layout = config.trainer.allow_irregular_node_layout;
  options.collective_timeout_s = config.trainer.collective_timeout_s;
  return options;
}

model::MicroBatch to_model_batch(const data::MicroBatch& batch) {
  model::MicroBatch out;
  out.tokens = batch.tokens;
  out.targets = batch.targets;
  out.batch_size = batch.micro_batch_size;
  out.first_sample_index = batch.sample_indices.empty() ? 0 : static_cast<std::uint64_t>(batch.sample_indices[0]);
  return out;
}

RunSetup::RunSetup(const TrainConfig& config, const comm::MpiCommunicator& world)
    : config_(config),
      grid_(world, config.model.tensor_parallel_size, config.model.pipeline_parallel_size, grid_options_of(config)),
      device_(device_of(config, grid_.topology())),
      flops_reference_(train::flops_reference(device_)),
      compute_stream_(device_.is_cpu() ? Stream() : Stream(device_)) {
  config.trainer.check_launch(grid_.world_size(), grid_.topology());
  const data::DataOptions& d = config.data;
  dp_device_comm_ = grid_.make_data_parallel_communicator(device_);
  if (grid_.tp_size() > 1) tp_device_comm_ = grid_.make_tensor_parallel_communicator(device_);
  if (grid_.pp_size() > 1) {
    pp_activation_comm_ = grid_.make_pipeline_communicator(device_);
    pp_gradient_comm_ = grid_.make_pipeline_communicator(device_);
    embedding_comm_ = comm::make_device_communicator(grid_.embedding_group(), device_);
  }

  const auto tokenizer = data::BpeTokenizer::load(d.tokenizer.vocab_file, d.tokenizer.merge_file);
  const model::GptConfig gpt = gpt_config_of(config, static_cast<int>(tokenizer.vocab_size()));
  // Refuse a model that cannot fit before building anything whose size grows with it.
  const bool on_gpu = device_.is_cuda();
  const int ranks_on_node = comm::query_node_local_rank(world.mpi_comm()).size;
  check_memory_budget(config, estimate_memory(config, gpt, grid_.dp_size(), on_gpu),
                      host_memory_bytes() / ranks_on_node,
                      on_gpu ? static_cast<double>(cuda::device_memory_total(device_.index)) : 0.0, on_gpu);

  data::GptDatasetsOptions data_options;
  data_options.data_prefix = d.data_prefix;
  for (const auto& source : d.data_prefix) data_files_.push_back(source.prefix);
  data_options.splits_string = d.splits_string;
  data_options.seq_length = gpt.seq_length;
  data_options.seed = static_cast<std::uint32_t>(config.trainer.seed);  // validated: in [0, 2^32)
  data_options.num_samples = data::megatron_num_samples(config.trainer.max_steps, config.trainer.val_check_interval,
                                                        config.trainer.limit_val_batches, 0, d.global_batch_size);
  data_options.index_cache_dir = d.index_mapping_dir;
  // With an index cache rank 0 builds and saves the index arrays first, then the other ranks map
  // them. Rank 0 tells the others whether it succeeded, so that its error never leaves them waiting.
  data::GptDatasets datasets;
  if (data_options.index_cache_dir.empty()) {
    datasets = data::build_gpt_datasets(data_options);
  } else {
    std::exception_ptr failure;
    std::int32_t built = 1;
    if (grid_.world_rank() == 0) {
      try {
        datasets = data::build_gpt_datasets(data_options);
      } catch (...) {
        failure = std::current_exception();
        built = 0;
      }
    }
    grid_.world().broadcast(Tensor::flat(&built, DType::i32, Device::cpu(), 1), 0);
    if (failure) std::rethrow_exception(failure);
    ADAMANT_CHECK(built == 1,
                  "rank 0 could not build the dataset index in model.data.index_mapping_dir ({}); see "
                  "its error",
                  data_options.index_cache_dir.string());
    if (grid_.world_rank() != 0) datasets = data::build_gpt_datasets(data_options);
  }
  ADAMANT_CHECK(datasets.train != nullptr, "model.data.splits_string '{}' leaves no documents for training",
                d.splits_string);
  data::DataLoaderOptions loader_options;
  loader_options.global_batch_size = d.global_batch_size;
  loader_options.micro_batch_size = d.micro_batch_size;
  loader_options.dp_rank = grid_.dp_rank();
  loader_options.dp_size = grid_.dp_size();
  train_loader_ = std::make_unique<data::DataLoader>(datasets.train, loader_options);
  ADAMANT_CHECK(
      datasets.valid != nullptr || config.trainer.limit_val_batches == 0 || config.trainer.val_check_interval <= 0,
      "model.data.splits_string '{}' leaves no documents for validation; give the validation split a "
      "share (e.g. \"949,50,1\") or set trainer.limit_val_batches=0",
      d.splits_string);
  if (datasets.valid != nullptr && config.trainer.limit_val_batches > 0) {
    loader_options.max_steps = config.trainer.limit_val_batches;
    valid_loader_ = std::make_unique<data::DataLoader>(datasets.valid, loader_options);
  }

  const model::PipelineStage stage = model::pipeline_stage(gpt, grid_.pp_rank());
  const PipelineLayout pipeline{gpt.pipeline_parallel_size, gpt.virtual_pipeline_size,
                                train_loader_->num_micro_batches()};
  const int passes_in_flight = peak_passes_in_flight(pipeline, grid_.pp_rank());  // checks the layout
  const ParamList params = model::build_stage_param_list(gpt, stage);
  optimizer_ = optim::make_optimizer(optimizer_options_of(config), params, *dp_device_comm_, compute_stream_,
                                     optim::GradNormScope{tp_device_comm_.get(), pp_gradient_comm_.get()});
  model_ = std::make_unique<model::GptModel>(
      gpt, weight_dtype_of(config), d.micro_batch_size, device_, static_cast<std::uint64_t>(config.trainer.seed),
      optimizer_->padded_numel(), tp_device_comm_.get(), grid_.pp_rank(), passes_in_flight);
  if (!config.trainer.matmul_algorithms.empty()) {
    matmul_algorithms_ = std::make_shared<const kernels::MatmulAlgorithmTable>(
        kernels::MatmulAlgorithmTable::read(config.trainer.matmul_algorithms));
    if (device_.is_cuda()) model_->set_matmul_algorithms(matmul_algorithms_);
  }
  model_->set_stream(compute_stream_);  // one compute stream for the model's kernels and the optimizer's
  // Pretrained weights replace the init before the optimizer copies them into its main weights.
  if (!config.trainer.restore_from_path.empty()) load_pretrained_weights(config.trainer.restore_from_path, *model_);
  optimizer_->attach(model_->weights(), model_->grads());
  pipeline_ = std::make_unique<PipelineRunner>(
      *model_, PipelineComms{pp_activation_comm_.get(), pp_gradient_comm_.get(), embedding_comm_.get()},
      train_loader_->num_micro_batches());
}

optim::LrSchedule RunSetup::lr_schedule() const { return lr_schedule_of(config_); }

std::string RunSetup::device_name() const {
  return flops_reference_.per_gpu ? fmt::format("{} ({})", device_.str(), flops_reference_.gpu_name) : device_.str();
}

std::string RunSetup::describe() const {
  const ParamList& params = model_->params();
  const double n = static_cast<double>(params.total_numel);
  const int d = grid_.dp_size();
  const double weight_bytes = static_cast<double>(model_->weights().bytes());
  const double grad_bytes = static_cast<double>(model_->grads().bytes());
  const double state_bytes = static_cast<double>(optimizer_->state_bytes());
  const optim::OptimizerOptions& o = config_.optim;
  const bool distributed = o.name == "distributed_fused_adam";
  const double main_bytes = !o.megatron_amp_O2 ? 0.0 : (o.store_param_remainders ? 2.0 : 4.0);
  const double formula = n * (dtype_size(weight_dtype_of(config_)) + dtype_size(model_->grad_buffer_dtype()) +
                              (main_bytes + 8.0) / (distributed ? static_cast<double>(d) : 1.0));
  constexpr double MiB = 1024.0 * 1024.0;
  return fmt::format(
             "model: GPT-3 {} layers, hidden {}, {} heads, seq {}, {} GELU, {:.2f}M parameters{} ({} weights)\n"
             "parallel: {} data-parallel rank(s){}{} on {}, {} micro-batch(es) of {} per rank per step\n"
             "optimizer: {} (bucket {} MiB, grad sync {}, remainders {}, overlap grad/param {}/{})\n"
             "memory per rank: weights {:.1f} MiB + grads {:.1f} MiB + optimizer state {:.1f} MiB = {:.1f} MiB "
             "(formula {:.1f} MiB)\n",
             config_.model.num_layers, config_.model.hidden_size, config_.model.num_attention_heads,
             config_.model.seq_length, kernels::gelu_form_name(config_.model.gelu()), n / 1e6,
             grid_.tp_size() > 1 || grid_.pp_size() > 1 ? " on this rank" : "", dtype_name(weight_dtype_of(config_)), d,
             grid_.tp_size() == 1 ? std::string()
                                  : fmt::format(" x {} tensor-parallel (sequence parallel {})", grid_.tp_size(),
                                                config_.model.sequence_parallel ? "on" : "off"),
             grid_.pp_size() == 1
                 ? std::string()
                 : fmt::format(" x {} pipeline stages{} (bubble {:.1f}% of the ideal step)", grid_.pp_size(),
                               pipeline_->layout().virtual_stages > 1
                                   ? fmt::format(", {} chunks each", pipeline_->layout().virtual_stages)
                                   : std::string(),
                               100.0 * pipeline_bubble_fraction(pipeline_->layout())),
             device_name(), train_loader_->num_micro_batches(), config_.data.micro_batch_size, o.name, o.bucket_cap_mb,
             dtype_name(o.grad_sync_dtype), o.store_param_remainders ? "on" : "off", o.overlap_grad_sync ? "on" : "off",
             o.overlap_param_sync ? "on" : "off", weight_bytes / MiB, grad_bytes / MiB, state_bytes / MiB,
             (weight_bytes + grad_bytes + state_bytes) / MiB, formula / MiB) +
         fmt::format("hosts: {}; collective timeout {} s\n", grid_.topology().describe(),
                     config_.trainer.collective_timeout_s) +
         describe_matmul_algorithms() + describe_recorded_passes();
}

std::string RunSetup::describe_recorded_passes() const {
  if (!config_.model.cuda_graph) return {};
  if (!model_->records_passes()) {  // the model runs passes with collectives inside directly
    return "recorded passes: none; with tensor parallelism each pass runs its collectives, so it runs directly\n";
  }
  if (!device_.is_cuda()) return "recorded passes: none on the CPU, which runs each pass directly\n";
  // The trainer reports gradients, and the backward is recorded in stretches, only then.
  return fmt::format("recorded passes: each training pass runs as a CUDA graph from its third run{}\n",
                     optimizer_->overlaps_grad_sync()
                         ? "; the last backward of a step in stretches, so that the gradient buckets' syncs "
                           "start between them, during the backward"
                         : "");
}

std::string RunSetup::describe_matmul_algorithms() const {
  if (!matmul_algorithms_) return {};
  const std::string& file = matmul_algorithms_->source();
  if (!device_.is_cuda()) return fmt::format("matmul algorithms: {} (not used on the CPU)\n", file);
  const kernels::MatmulTarget target = kernels::matmul_target(model_->workspace());
  const std::size_t recorded = matmul_algorithms_->count_for(target);
  if (recorded == 0) {
    return fmt::format(
        "matmul algorithms: {} has no choices for this GPU and cuBLASLt ({}, {}): cuBLASLt's heuristics choose; "
        "adamant tune-matmul records them\n",
        file, target.gpu, target.cublaslt_version);
  }
  return fmt::format("matmul algorithms: {} choices for this GPU and cuBLASLt ({}, {}) from {}\n", recorded, target.gpu,
                     target.cublaslt_version, file);
}

}  // namespace adamant::train
