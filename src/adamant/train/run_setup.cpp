#include "adamant/train/run_setup.h"

#include <fmt/format.h>

#include <exception>

#include "adamant/comm/mpi_session.h"
#include "adamant/comm/placement.h"
#include "adamant/core/cuda_runtime.h"
#include "adamant/core/error.h"
#include "adamant/data/bpe_tokenizer.h"
#include "adamant/data/gpt_datasets.h"
#include "adamant/train/hf_gpt2_folder.h"
#include "adamant/train/memory_budget.h"

namespace adamant::train {

model::GptConfig gpt_config_of(const ModelConfig& m, int vocab_size) {
  model::GptConfig g;
  g.num_layers = m.num_layers;
  g.hidden_size = m.hidden_size;
  g.num_attention_heads = m.num_attention_heads;
  g.ffn_hidden_size = m.ffn_hidden_size;
  g.seq_length = m.encoder_seq_length;
  g.vocab_size = vocab_size;
  g.make_vocab_size_divisible_by = m.make_vocab_size_divisible_by;
  g.tensor_parallel_size = m.tensor_model_parallel_size;
  g.sequence_parallel = m.sequence_parallel;
  g.init_method_std = static_cast<float>(m.init_method_std);
  g.hidden_dropout = static_cast<float>(m.hidden_dropout);
  g.attention_dropout = static_cast<float>(m.attention_dropout);
  g.recompute_activation = m.activations_checkpoint_granularity == "selective";
  g.gelu = m.openai_gelu ? kernels::GeluForm::tanh : kernels::GeluForm::exact;
  g.validate();
  return g;
}

DType weight_dtype_of(const TrainConfig& config) {
  return config.model.megatron_amp_O2 ? config.trainer.precision : DType::f32;
}

optim::OptimizerOptions optimizer_options_of(const TrainConfig& config) {
  const OptimConfig& o = config.model.optim;
  optim::OptimizerOptions opts;
  opts.name = o.name;
  opts.beta1 = o.beta1;
  opts.beta2 = o.beta2;
  opts.eps = o.eps;
  opts.weight_decay = o.weight_decay;
  opts.adam_w_mode = o.adam_w_mode;
  opts.gradient_clip_val = config.trainer.gradient_clip_val;
  opts.model_dtype = weight_dtype_of(config);
  opts.megatron_amp_O2 = config.model.megatron_amp_O2;
  opts.bucket_cap_mb = o.bucket_cap_mb;
  opts.overlap_grad_sync = o.overlap_grad_sync;
  opts.overlap_param_sync = o.overlap_param_sync;
  opts.grad_sync_dtype = o.grad_sync_dtype;
  opts.store_param_remainders = o.store_param_remainders;
  opts.average_grad_sync = o.average_grad_sync;
  opts.initial_loss_scale = config.model.native_amp_init_scale;
  opts.loss_scale_growth_interval = config.model.native_amp_growth_interval;
  opts.hysteresis = config.model.hysteresis;
  return opts;
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
      grid_(world, config.model.tensor_model_parallel_size, grid_options_of(config)),
      device_(device_of(config, grid_.topology())),
      compute_stream_(device_.is_cpu() ? Stream() : Stream(device_)) {
  const ModelConfig& m = config.model;
  dp_device_comm_ = grid_.make_data_parallel_communicator(device_);
  if (grid_.tp_size() > 1) tp_device_comm_ = grid_.make_tensor_parallel_communicator(device_);

  const auto tokenizer = data::BpeTokenizer::load(m.tokenizer.vocab_file, m.tokenizer.merge_file);
  const int vocab_size = static_cast<int>(tokenizer.vocab_size());
  const model::GptConfig gpt = gpt_config_of(m, vocab_size);
  // Refuse a model that cannot fit before building anything whose size grows with it.
  const bool on_gpu = device_.is_cuda();
  const int ranks_on_node = comm::query_node_local_rank(world.mpi_comm()).size;
  check_memory_budget(config, estimate_memory(config, gpt, grid_.dp_size(), on_gpu),
                      host_memory_bytes() / ranks_on_node,
                      on_gpu ? static_cast<double>(cuda::device_memory_total(device_.index)) : 0.0, on_gpu);

  data::GptDatasetsOptions data_options;
  for (const auto& [weight, prefix] : m.data.data_prefix) {
    data_options.data_prefix.push_back({weight, prefix});
    data_files_.push_back(prefix);
  }
  data_options.splits_string = m.data.splits_string;
  data_options.seq_length = m.encoder_seq_length;
  ADAMANT_CHECK(m.seed >= 0 && m.seed <= 0xffffffffLL,
                "model.seed={} is out of range; the data shuffle takes a seed in [0, 4294967295]", m.seed);
  data_options.seed = static_cast<std::uint32_t>(m.seed);
  data_options.num_samples = data::megatron_num_samples(config.trainer.max_steps, config.trainer.val_check_interval,
                                                        config.trainer.limit_val_batches, 0, m.global_batch_size);
  data_options.index_cache_dir = m.data.index_mapping_dir;
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
                m.data.splits_string);
  data::DataLoaderOptions loader_options;
  loader_options.global_batch_size = m.global_batch_size;
  loader_options.micro_batch_size = m.micro_batch_size;
  loader_options.dp_rank = grid_.dp_rank();
  loader_options.dp_size = grid_.dp_size();
  train_loader_ = std::make_unique<data::DataLoader>(datasets.train, loader_options);
  ADAMANT_CHECK(
      datasets.valid != nullptr || config.trainer.limit_val_batches == 0 || config.trainer.val_check_interval <= 0,
      "model.data.splits_string '{}' leaves no documents for validation; give the validation split a "
      "share (e.g. \"949,50,1\") or set trainer.limit_val_batches=0",
      m.data.splits_string);
  if (datasets.valid != nullptr && config.trainer.limit_val_batches > 0) {
    loader_options.max_steps = config.trainer.limit_val_batches;
    valid_loader_ = std::make_unique<data::DataLoader>(datasets.valid, loader_options);
  }

  const ParamList params = model::build_param_list(gpt);
  optimizer_ = optim::make_optimizer(optimizer_options_of(config), params, *dp_device_comm_, compute_stream_,
                                     optim::GradNormScope{tp_device_comm_.get()});
  model_ = std::make_unique<model::GptModel>(gpt, weight_dtype_of(config), m.micro_batch_size, device_,
                                             static_cast<std::uint64_t>(m.seed), optimizer_->padded_numel(),
                                             tp_device_comm_.get());
  model_->set_stream(compute_stream_);  // one compute stream for the model's kernels and the optimizer's
  // Pretrained weights replace the init before the optimizer copies them into its main weights.
  if (!m.restore_from_path.empty()) load_pretrained_weights(m.restore_from_path, *model_);
  optimizer_->attach(model_->weights(), model_->grads());
}

optim::LrSchedule RunSetup::lr_schedule() const {
  const OptimConfig& o = config_.model.optim;
  optim::LrSchedule s;
  s.name = o.sched.name;
  s.lr = o.lr;
  s.min_lr = o.sched.min_lr;
  s.warmup_steps = o.sched.warmup_steps;
  s.constant_steps = o.sched.constant_steps;
  s.max_steps = o.sched.max_steps.value_or(config_.trainer.max_steps);
  return s;
}

std::string RunSetup::describe() const {
  const ParamList& params = model_->params();
  const double n = static_cast<double>(params.total_numel);
  const int d = grid_.dp_size();
  const double weight_bytes = static_cast<double>(model_->weights().bytes());
  const double grad_bytes = static_cast<double>(model_->grads().bytes());
  const double state_bytes = static_cast<double>(optimizer_->state_bytes());
  const OptimConfig& o = config_.model.optim;
  const bool distributed = o.name == "distributed_fused_adam";
  const double main_bytes = !config_.model.megatron_amp_O2 ? 0.0 : (o.store_param_remainders ? 2.0 : 4.0);
  const double formula = n * (dtype_size(weight_dtype_of(config_)) + 4.0 +
                              (main_bytes + 8.0) / (distributed ? static_cast<double>(d) : 1.0));
  constexpr double MiB = 1024.0 * 1024.0;
  return fmt::format(
             "model: GPT-3 {} layers, hidden {}, {} heads, seq {}, {:.2f}M parameters{} ({} weights)\n"
             "parallel: {} data-parallel rank(s){} on {}, {} micro-batch(es) of {} per rank per step\n"
             "optimizer: {} (bucket {} MiB, grad sync {}, remainders {}, overlap grad/param {}/{})\n"
             "memory per rank: weights {:.1f} MiB + grads {:.1f} MiB + optimizer state {:.1f} MiB = {:.1f} MiB "
             "(formula {:.1f} MiB)\n",
             config_.model.num_layers, config_.model.hidden_size, config_.model.num_attention_heads,
             config_.model.encoder_seq_length, n / 1e6, grid_.tp_size() > 1 ? " per tensor-parallel rank" : "",
             dtype_name(weight_dtype_of(config_)), d,
             grid_.tp_size() == 1 ? std::string()
                                  : fmt::format(" x {} tensor-parallel (sequence parallel {})", grid_.tp_size(),
                                                config_.model.sequence_parallel ? "on" : "off"),
             device_.str(), train_loader_->num_micro_batches(), config_.model.micro_batch_size, o.name, o.bucket_cap_mb,
             dtype_name(o.grad_sync_dtype), o.store_param_remainders ? "on" : "off", o.overlap_grad_sync ? "on" : "off",
             o.overlap_param_sync ? "on" : "off", weight_bytes / MiB, grad_bytes / MiB, state_bytes / MiB,
             (weight_bytes + grad_bytes + state_bytes) / MiB, formula / MiB) +
         fmt::format("hosts: {}; collective timeout {} s\n", grid_.topology().describe(),
                     config_.trainer.collective_timeout_s);
}

}  // namespace adamant::train
