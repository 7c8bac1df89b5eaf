#pragma once
// One optimizer with its flat model buffers on one backend (GPU buffers with the
// NCCL communicator, or host buffers with MPI), driven the way the trainer drives
// it, so the GPU tests can run the same steps on both backends with identical
// gradients and compare the results after every step.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/core/buffer.h"
#include "adamant/core/param_spec.h"
#include "adamant/core/stream.h"
#include "adamant/optim/optimizer.h"
#include "synthetic_model.h"

namespace adamant::optim::testing {

// The device of the runs under test: this rank's GPU (its node-local rank). With
// ADAMANT_OPTIM_TEST_DEVICE=cpu it is the host instead, which checks the harness
// itself (CPU against CPU) on a machine without GPUs.
Device device_under_test();

class BackendRun {
 public:
  // bf16 model weights start as the synthetic model's initial weights; grads start at zero.
  BackendRun(const OptimizerOptions& options, const ParamList& params, comm::Communicator& comm, Device device);
  BackendRun(const BackendRun&) = delete;
  BackendRun& operator=(const BackendRun&) = delete;

  Optimizer& optimizer() { return *optimizer_; }
  Device device() const { return device_; }

  // Before the host writes this step's gradients: the previous step's parameter sync and its zeroing of the
  // grads (both on streams) are complete.
  void prepare_for_gradients();
  // As the backward pass would: parameter p's gradient (from the host array of all gradients) is written into
  // the grad buffer, then reported final.
  void feed_gradient(std::size_t param, std::span<const float> all_grads);
  // The model weights (bf16 bits, padded_numel), after every pending parameter sync.
  std::vector<std::uint16_t> weight_bits();
  // The fp32 gradient buffer read back (padded_numel values).
  std::vector<float> grads();
  // save() into `dir` (collective), then the state read back per parameter.
  FlatState saved_state(const std::filesystem::path& dir);

 private:
  ParamList params_;
  Device device_;
  Stream stream_;  // the compute stream the optimizer orders its work on
  Buffer weight_buffer_, grad_buffer_;
  Tensor weights_, grads_;
  std::unique_ptr<Optimizer> optimizer_;
};

// The synthetic model's deterministic initial weights as bf16 bits, padded_numel values.
std::vector<std::uint16_t> initial_weight_bits(const ParamList& params, std::size_t padded_numel);

// This rank's gradient sum for one step, computed on the host from the weights `weight_bits`: micro-batches
// m = 0..micro_batches-1 of global sample (step * micro_batches * dp + rank * micro_batches + m), added in order
// in fp32 exactly as SyntheticModel::accumulate_micro_batch does.
std::vector<float> rank_gradients(const ParamList& params, std::span<const std::uint16_t> weight_bits,
                                  std::int64_t step, int rank, int dp, int micro_batches);

// One training step on every run with the same gradients, fed parameter by parameter in layout order (each
// run's copy precedes its on_grad_ready), then step(lr, grad_scale) on each. Returns each run's result.
std::vector<StepResult> step_together(std::span<BackendRun* const> runs, const ParamList& params,
                                      std::span<const float> grads, double lr, double grad_scale);

}  // namespace adamant::optim::testing
