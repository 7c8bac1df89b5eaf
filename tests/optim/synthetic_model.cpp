#include "synthetic_model.h"

#include <cmath>
#include <cstring>

#include "adamant/core/archive.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"

namespace adamant::optim::testing {

ParamList make_param_list(const std::vector<SizedParam>& sizes) {
  ParamList list;
  for (const SizedParam& p : sizes) {
    ParamSpec spec;
    spec.name = p.name;
    spec.shape = {static_cast<std::int64_t>(p.numel)};
    spec.numel = p.numel;
    spec.offset = list.total_numel;
    spec.weight_decay = p.weight_decay;
    list.params.push_back(spec);
    list.total_numel += p.numel;
  }
  return list;
}

ParamList synthetic_params() {
  return make_param_list({{"decoder.final_layernorm.weight", 29, false},
                          {"decoder.mlp.fc1.weight", 1500, true},
                          {"decoder.mlp.fc1.bias", 37, false},
                          {"decoder.attention.qkv.weight", 611, true},
                          {"decoder.attention.qkv.bias", 45, false},
                          {"position_embeddings", 130, true},
                          {"word_embeddings", 777, true}});  // tied with the output layer: first and last use
}

ParamList gpt3_126m_params() {
  const std::size_t h = 768, vocab = 50304, sequence = 2048, layers = 12;
  std::vector<std::pair<std::string, std::size_t>> named;
  std::vector<bool> decay;
  const auto add = [&](std::string name, std::size_t numel, bool wd) {
    named.emplace_back(std::move(name), numel);
    decay.push_back(wd);
  };
  add("final_layernorm.weight", h, false);
  add("final_layernorm.bias", h, false);
  for (std::size_t l = layers; l-- > 0;) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add(p + "mlp.fc2.bias", h, false);
    add(p + "mlp.fc2.weight", 4 * h * h, true);
    add(p + "mlp.fc1.bias", 4 * h, false);
    add(p + "mlp.fc1.weight", 4 * h * h, true);
    add(p + "ln2.bias", h, false);
    add(p + "ln2.weight", h, false);
    add(p + "attn.proj.bias", h, false);
    add(p + "attn.proj.weight", h * h, true);
    add(p + "attn.qkv.bias", 3 * h, false);
    add(p + "attn.qkv.weight", 3 * h * h, true);
    add(p + "ln1.bias", h, false);
    add(p + "ln1.weight", h, false);
  }
  add("position_embeddings", sequence * h, true);
  add("word_embeddings", vocab * h, true);
  std::vector<SizedParam> sizes;
  for (std::size_t i = 0; i < named.size(); ++i) sizes.push_back({named[i].first.c_str(), named[i].second, decay[i]});
  return make_param_list(sizes);
}

SyntheticModel::SyntheticModel(const ParamList& params, DType dtype, std::size_t padded_numel, DType grad_dtype)
    : params_(params),
      dtype_(dtype),
      grad_dtype_(grad_dtype),
      weight_buffer_(padded_numel * dtype_size(dtype), Device::cpu()),
      grad_buffer_(padded_numel * dtype_size(grad_dtype), Device::cpu()),
      weights_(Tensor::flat(weight_buffer_.data(), dtype, Device::cpu(), padded_numel)),
      grads_(Tensor::flat(grad_buffer_.data(), grad_dtype, Device::cpu(), padded_numel)) {
  std::memset(grad_buffer_.data(), 0, grad_buffer_.bytes());
}

void SyntheticModel::init_weights() {
  for (const ParamSpec& spec : params_.params) {
    for (std::size_t j = 0; j < spec.numel; ++j) {
      const std::size_t i = spec.offset + j;
      const auto value = static_cast<float>(0.5 * std::sin(0.71 * static_cast<double>(i) + 0.3) + 0.02);
      switch (dtype_) {
        case DType::bf16:
          static_cast<bf16_bits*>(weights_.data)[i] = f32_to_bf16(value);
          break;
        case DType::f16:
          static_cast<f16_bits*>(weights_.data)[i] = f32_to_f16(value);
          break;
        default:
          static_cast<float*>(weights_.data)[i] = value;
          break;
      }
    }
  }
}

float SyntheticModel::weight(std::size_t flat) const {
  switch (dtype_) {
    case DType::bf16:
      return bf16_to_f32(static_cast<const bf16_bits*>(weights_.data)[flat]);
    case DType::f16:
      return f16_to_f32(static_cast<const f16_bits*>(weights_.data)[flat]);
    default:
      return static_cast<const float*>(weights_.data)[flat];
  }
}

std::vector<float> SyntheticModel::weights_f32() const {
  std::vector<float> out(weights_.numel());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = weight(i);
  return out;
}

std::vector<std::uint16_t> SyntheticModel::weight_bits() const {
  ADAMANT_CHECK(dtype_size(dtype_) == 2, "weight_bits of a {} model", dtype_name(dtype_));
  const auto* bits = static_cast<const std::uint16_t*>(weights_.data);
  return {bits, bits + weights_.numel()};
}

float SyntheticModel::sample_gradient(float weight, std::int64_t sample, std::size_t flat) {
  const auto c = static_cast<float>(0.05 + 0.01 * static_cast<double>(sample % 5));
  const auto d =
      static_cast<float>(0.02 * std::sin(0.37 * static_cast<double>(flat) + 1.3 * static_cast<double>(sample)) +
                         0.001 * static_cast<double>(static_cast<std::int64_t>(flat * 7 + sample) % 11 - 5));
  return weight * c + d;
}

void SyntheticModel::zero_grads() {
  const std::size_t element = dtype_size(grad_dtype_);
  for (const ParamSpec& spec : params_.params) {
    std::memset(static_cast<char*>(grads_.data) + spec.offset * element, 0, spec.numel * element);
  }
}

void SyntheticModel::accumulate_micro_batch(std::int64_t sample, float loss_scale, Optimizer* notify,
                                            Optimizer* weights_from) {
  auto* grads = static_cast<float*>(grads_.data);
  auto* grads_bf16 = static_cast<bf16_bits*>(grads_.data);
  for (std::size_t p = 0; p < params_.size(); ++p) {
    if (weights_from != nullptr) weights_from->wait_for_param(p);
    const ParamSpec& spec = params_[p];
    for (std::size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
      const float g = sample_gradient(weight(i), sample, i) * loss_scale;
      if (grad_dtype_ == DType::bf16) {
        grads_bf16[i] = f32_to_bf16(bf16_to_f32(grads_bf16[i]) + g);
      } else {
        grads[i] += g;
      }
    }
    if (notify != nullptr) notify->on_grad_ready(p);
  }
}

std::vector<StepResult> run_steps(Optimizer& optimizer, SyntheticModel& model, int rank, int dp,
                                  const RunConfig& config) {
  std::vector<StepResult> results;
  const int mb = config.micro_batches_per_rank;
  const std::int64_t global_batch = static_cast<std::int64_t>(mb) * dp;
  for (std::int64_t step = config.first_step; step < config.first_step + config.steps; ++step) {
    // Before the first forward: every weight, or each one before its first read (the trainer's choice).
    const bool per_param = optimizer.overlaps_param_sync();
    if (!per_param) optimizer.wait_for_params();
    model.zero_grads();
    for (int m = 0; m < mb; ++m) {
      const bool last = m == mb - 1;
      if (last && config.before_last_micro_batch) config.before_last_micro_batch(step, model);
      const std::int64_t sample = step * global_batch + static_cast<std::int64_t>(rank) * mb + m;
      model.accumulate_micro_batch(sample, static_cast<float>(optimizer.loss_scale()), last ? &optimizer : nullptr,
                                   per_param && m == 0 ? &optimizer : nullptr);
    }
    results.push_back(optimizer.step(learning_rate(config.schedule, step), 1.0 / static_cast<double>(global_batch)));
  }
  optimizer.wait_for_params();
  return results;
}

FlatState read_flat_state(const std::filesystem::path& dir, const ParamList& params) {
  FlatState state{std::vector<float>(params.total_numel, NAN), std::vector<float>(params.total_numel, NAN),
                  std::vector<float>(params.total_numel, NAN)};
  int file_count = 1;
  for (int f = 0; f < file_count; ++f) {
    const ArchiveReader reader(dir / ("optim_rank_" + std::to_string(f) + ".adm"));
    file_count = reader.meta().at("file_count").get<int>();
    const auto main = reader.read_all("main_weights");
    const auto m = reader.read_all("exp_avg");
    const auto v = reader.read_all("exp_avg_sq");
    for (const auto& piece : reader.meta().at("pieces")) {
      const auto param = piece[0].get<std::size_t>(), param_offset = piece[1].get<std::size_t>(),
                 state_offset = piece[2].get<std::size_t>(), numel = piece[3].get<std::size_t>();
      const std::size_t flat = params[param].offset + param_offset;
      std::memcpy(state.main.data() + flat, main.data() + state_offset * 4, numel * 4);
      std::memcpy(state.exp_avg.data() + flat, m.data() + state_offset * 4, numel * 4);
      std::memcpy(state.exp_avg_sq.data() + flat, v.data() + state_offset * 4, numel * 4);
    }
  }
  return state;
}

}  // namespace adamant::optim::testing
