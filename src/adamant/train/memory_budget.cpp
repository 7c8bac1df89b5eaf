#include "adamant/train/memory_budget.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "adamant/core/error.h"
#include "adamant/train/rank_memory.h"

namespace adamant::train {

namespace {

// Per tensor of the model: its ParamSpec (name, shape) and its share of the bucket plan's
// fragments and segment tables; measured a few hundred bytes, rounded up.
constexpr double kBookkeepingBytesPerTensor = 1024;
constexpr int kTensorsPerLayer = 12;
// Up to this many layers per pipeline stage the estimate sizes every buffer exactly (rank_memory.h).
constexpr double kExactLayersPerStage = 4096;

std::string bytes_text(double bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

}  // namespace

double parameters_per_rank(const model::GptConfig& gpt) {
  const double hidden = gpt.hidden_size, ffn = gpt.local_ffn(), seq = gpt.seq_length;
  const double width = static_cast<double>(gpt.local_heads()) * gpt.head_dim();
  const double per_layer = 4 * hidden                          // two layernorms
                           + 3 * width * hidden + 3 * width    // query/key/value
                           + hidden * width + hidden           // attention output
                           + 2 * ffn * hidden + ffn + hidden;  // MLP
  return static_cast<double>(gpt.local_vocab()) * hidden + seq * hidden + gpt.num_layers * per_layer + 2 * hidden;
}

MemoryEstimate estimate_memory(const TrainConfig& config, const model::GptConfig& gpt, int dp, bool on_gpu) {
  MemoryEstimate e;
  const optim::OptimizerOptions& o = config.optim;
  const bool o2 = o.megatron_amp_O2;
  const double weight_bytes = o2 ? static_cast<double>(dtype_size(config.trainer.precision)) : 4.0;
  const double main_bytes = !o2 ? 0.0 : (o.store_param_remainders ? 2.0 : 4.0);
  const double state_share = o.name == "distributed_fused_adam" ? static_cast<double>(dp) : 1.0;
  const double bytes_per_parameter = weight_bytes + 4.0 + (main_bytes + 8.0) / state_share;
  const int stages = gpt.pipeline_parallel_size;
  const double layers_per_stage = static_cast<double>(gpt.num_layers) / stages;
  e.bookkeeping = (layers_per_stage * kTensorsPerLayer + 4) * kBookkeepingBytesPerTensor;
  if (layers_per_stage <= kExactLayersPerStage) {
    // What the run allocates, from the functions that size its buffers, for its busiest pipeline stage.
    const long long per_step = static_cast<long long>(config.data.micro_batch_size) * dp;
    const int micro_batches = static_cast<int>(std::max<long long>(1, config.data.global_batch_size / per_step));
    const RankMemory rank =
        busiest_rank_memory(config, gpt, dp, std::max(micro_batches, stages), on_gpu ? Device::cuda(0) : Device::cpu());
    e.parameters = rank.parameters;
    e.model_state = e.parameters * bytes_per_parameter;
    e.activations = rank.activations;
    e.on_compute_device = rank.total();
    // A GPU run stages the weights on the host for checkpoints.
    e.on_host = e.bookkeeping + (on_gpu ? e.parameters * weight_bytes + rank.host : e.on_compute_device);
    return e;
  }
  // Thousands of layers per stage: far beyond any machine, and too many tensors to list cheaply. The
  // closed form, with the layers spread evenly over the stages, says by how much.
  e.parameters = parameters_per_rank(gpt) / stages;
  e.model_state = e.parameters * bytes_per_parameter;
  // Saved activations of one micro-batch (Megatron's estimate: 34 s b h + 5 a s^2 b bytes per layer
  // in 16-bit), plus the logits in fp32.
  const double s = gpt.seq_length, b = config.data.micro_batch_size, h = gpt.hidden_size;
  const double heads = gpt.local_heads();
  e.activations = layers_per_stage * (34 * s * b * h / gpt.tensor_parallel_size + 5 * heads * s * s * b) +
                  4 * s * b * gpt.local_vocab();
  e.on_compute_device = e.model_state + e.activations;
  e.on_host = e.bookkeeping + (on_gpu ? e.parameters * weight_bytes : e.on_compute_device);
  return e;
}

double host_memory_bytes() {
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
}

void check_memory_budget(const TrainConfig& config, const MemoryEstimate& e, double host_bytes_per_rank,
                         double device_bytes, bool on_gpu) {
  const model::GptConfig& m = config.model;
  const auto refuse = [&](const char* where, double need, double have) {
    fail(
        "this model does not fit: model.num_layers={}, model.hidden_size={}, model.ffn_hidden_size={}, "
        "model.encoder_seq_length={} and model.micro_batch_size={} give {:.3g} parameters per rank, which need about "
        "{} of {} memory per rank (weights, gradients and optimizer state {}, activations {}, bookkeeping {}), but "
        "there is {} per rank; reduce model.num_layers or model.hidden_size (or model.micro_batch_size, "
        "model.encoder_seq_length), or spread the model with model.tensor_model_parallel_size or "
        "model.pipeline_model_parallel_size, or the optimizer state with model.optim.name=distributed_fused_adam over "
        "more ranks (adamant plan CONFIG --gpus N lists the layouts that fit)",
        m.num_layers, m.hidden_size, m.ffn_hidden_size, m.seq_length, config.data.micro_batch_size, e.parameters,
        bytes_text(need), where, bytes_text(e.model_state), bytes_text(e.activations), bytes_text(e.bookkeeping),
        bytes_text(have));
  };
  if (e.on_host > host_bytes_per_rank) refuse("host", e.on_host, host_bytes_per_rank);
  if (on_gpu && e.on_compute_device > device_bytes) refuse("GPU", e.on_compute_device, device_bytes);
}

}  // namespace adamant::train
