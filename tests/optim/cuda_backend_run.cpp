#include "cuda_backend_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "adamant/comm/mpi_session.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"

namespace adamant::optim::testing {

Device device_under_test() {
  const char* forced = std::getenv("ADAMANT_OPTIM_TEST_DEVICE");
  if (forced != nullptr && std::string_view(forced) == "cpu") return Device::cpu();
  const comm::MpiSession session;  // MPI is up already (test main); this only reads the node-local rank
  const int visible = cuda_device_count();
  ADAMANT_CHECK(visible >= session.local_size(),
                "optim_cuda_tests: {} ranks on this node but {} GPU(s) visible; run under mpirun -np 2 on a machine "
                "with 2 GPUs (one per rank), or set ADAMANT_OPTIM_TEST_DEVICE=cpu to check the harness on the host",
                session.local_size(), visible);
  return Device::cuda(session.local_rank());
}

BackendRun::BackendRun(const OptimizerOptions& options, const ParamList& params, comm::Communicator& comm,
                       Device device)
    : params_(params), device_(device), stream_(device.is_cpu() ? Stream() : Stream(device)) {
  ADAMANT_CHECK(options.model_dtype == DType::bf16, "BackendRun holds bf16 model weights, not {}",
                dtype_name(options.model_dtype));
  optimizer_ = make_optimizer(options, params, comm, stream_);
  const std::size_t n = optimizer_->padded_numel();
  const auto initial_bits = initial_weight_bits(params, n);
  weight_buffer_ = Buffer(n * sizeof(bf16_bits), device);
  grad_buffer_ = Buffer(n * sizeof(float), device);
  weights_ = Tensor::of(weight_buffer_, DType::bf16);
  grads_ = Tensor::of(grad_buffer_, DType::f32);
  copy_bytes(weights_.data, device, initial_bits.data(), Device::cpu(), weights_.bytes());
  optimizer_->attach(weights_, grads_);
}

void BackendRun::prepare_for_gradients() {
  optimizer_->wait_for_params();
  // The host copies below are not ordered with the optimizer's streams.
  stream_.synchronize();
}

void BackendRun::feed_gradient(std::size_t param, std::span<const float> all_grads) {
  const ParamSpec& spec = params_[param];
  copy_bytes(grads_.slice(spec.offset, spec.numel).data, device_, all_grads.data() + spec.offset, Device::cpu(),
             spec.numel * sizeof(float));
  optimizer_->on_grad_ready(param);
}

std::vector<std::uint16_t> BackendRun::weight_bits() {
  prepare_for_gradients();
  std::vector<std::uint16_t> bits(weights_.numel());
  copy_bytes(bits.data(), Device::cpu(), weights_.data, device_, weights_.bytes());
  return bits;
}

std::vector<float> BackendRun::grads() {
  stream_.synchronize();
  std::vector<float> values(grads_.numel());
  copy_bytes(values.data(), Device::cpu(), grads_.data, device_, grads_.bytes());
  return values;
}

FlatState BackendRun::saved_state(const std::filesystem::path& dir) {
  optimizer_->save(dir);
  return read_flat_state(dir, params_);
}

std::vector<std::uint16_t> initial_weight_bits(const ParamList& params, std::size_t padded_numel) {
  SyntheticModel model(params, DType::bf16, padded_numel);
  model.init_weights();
  return model.weight_bits();
}

std::vector<float> rank_gradients(const ParamList& params, std::span<const std::uint16_t> weight_bits,
                                  std::int64_t step, int rank, int dp, int micro_batches) {
  std::vector<float> grads(weight_bits.size(), 0.0f);
  const std::int64_t global_batch = static_cast<std::int64_t>(micro_batches) * dp;
  for (int m = 0; m < micro_batches; ++m) {
    const std::int64_t sample = step * global_batch + static_cast<std::int64_t>(rank) * micro_batches + m;
    for (const ParamSpec& spec : params.params) {
      for (std::size_t i = spec.offset; i < spec.offset + spec.numel; ++i) {
        grads[i] += SyntheticModel::sample_gradient(bf16_to_f32(weight_bits[i]), sample, i);
      }
    }
  }
  return grads;
}

std::vector<StepResult> step_together(std::span<BackendRun* const> runs, const ParamList& params,
                                      std::span<const float> grads, double lr, double grad_scale) {
  for (BackendRun* run : runs) run->prepare_for_gradients();
  for (std::size_t p = 0; p < params.size(); ++p) {
    for (BackendRun* run : runs) run->feed_gradient(p, grads);
  }
  std::vector<StepResult> results;
  for (BackendRun* run : runs) results.push_back(run->optimizer().step(lr, grad_scale));
  return results;
}

}  // namespace adamant::optim::testing
