#pragma once
// A synthetic "model" for optimizer tests: a ParamList of odd sizes (one larger
// than the test buckets, decay and no-decay, the tied word embedding last) in one
// flat buffer, and a deterministic gradient g_i = w_i * c(s) + d(s, i) for global
// sample s, so every rank computes its own micro-batches and any run can be
// replayed exactly on one rank.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/param_spec.h"
#include "adamant/core/tensor.h"
#include "adamant/optim/lr_schedule.h"
#include "adamant/optim/optimizer.h"

namespace adamant::optim::testing {

struct SizedParam {
  const char* name;
  std::size_t numel;
  bool weight_decay;
};

// Packs the parameters back to back, in the given order.
ParamList make_param_list(const std::vector<SizedParam>& sizes);
// The default test model (3129 weights; "decoder.mlp.fc1.weight" holds 1500).
ParamList synthetic_params();
// GPT-3 126M (12 layers, hidden 768, vocab 50304, sequence 2048), in the model's reverse order of use.
ParamList gpt3_126m_params();

class SyntheticModel {
 public:
  // `grad_dtype`: fp32, or bf16 as a GPU model's gradient buffer with grad_sync_dtype bf16 (each sum rounded).
  SyntheticModel(const ParamList& params, DType dtype, std::size_t padded_numel, DType grad_dtype = DType::f32);

  Tensor weights() const { return weights_; }
  Tensor grads() const { return grads_; }
  const ParamList& params() const { return params_; }

  // Deterministic initial weights (rounded to the model dtype); padding stays 0.
  void init_weights();
  float weight(std::size_t flat) const;
  std::vector<float> weights_f32() const;          // all padded_numel weights as fp32
  std::vector<std::uint16_t> weight_bits() const;  // bf16/fp16 bit patterns (16-bit models)

  static float sample_gradient(float weight, std::int64_t sample, std::size_t flat);
  // Zeroes the parameters' gradients (the padding is never written): a step starts so, as the
  // trainer's model drops the last step's (the optimizer leaves them).
  void zero_grads();
  // grads += loss_scale * g(weights, sample), parameter by parameter in ParamList order; after each parameter,
  // notify->on_grad_ready(p) when notify is given (the last micro-batch of a step). With weights_from, its
  // wait_for_param(p) comes before the weights of p are read (the first micro-batch of a step whose
  // optimizer overlaps its parameter sync, as the model's first forward reports its weights).
  void accumulate_micro_batch(std::int64_t sample, float loss_scale, Optimizer* notify,
                              Optimizer* weights_from = nullptr);

 private:
  ParamList params_;
  DType dtype_;
  DType grad_dtype_;
  Buffer weight_buffer_, grad_buffer_;
  Tensor weights_, grads_;
};

struct RunConfig {
  std::int64_t first_step = 0;
  int steps = 1;
  int micro_batches_per_rank = 1;
  LrSchedule schedule{"CosineAnnealing", 1e-2, 3, 0, 1e-4, 40};
  // Called before the last micro-batch of each step (e.g. to inject an inf).
  std::function<void(std::int64_t step, SyntheticModel&)> before_last_micro_batch;
};

// Trains like the trainer would: global batch of micro_batches_per_rank * dp samples per step, rank r takes
// the r-th contiguous slice, grad_scale = 1 / (micro-batches per rank * dp).
std::vector<StepResult> run_steps(Optimizer& optimizer, SyntheticModel& model, int rank, int dp,
                                  const RunConfig& config);

// A checkpoint read back per parameter (independently of the optimizer's reader): main weights, exp_avg and
// exp_avg_sq at the parameters' flat offsets, total_numel elements each.
struct FlatState {
  std::vector<float> main, exp_avg, exp_avg_sq;
};
FlatState read_flat_state(const std::filesystem::path& dir, const ParamList& params);

}  // namespace adamant::optim::testing
