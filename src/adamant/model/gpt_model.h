#pragma once
// The GPT-3 decoder (pre-LN, learned positions, tied word embeddings, exact GELU)
// with explicit layer-by-layer forward and backward; no autograd.
//
// Memory: weights, gradients, a per-micro-batch gradient scratch and all
// activations each live in one flat Buffer allocated in the constructor;
// forward_backward never allocates.
//
// Precision: weights may be bf16/fp16 (megatron_amp_O2 model weights), fp32, or
// fp64 (reference checks). bf16/fp16 weights are converted into a preallocated
// fp32 working copy once per forward; activations and gradients are computed in
// fp32 (fp64 when the weights are fp64). The gradient of one micro-batch is formed
// in the scratch and then added to grads(), so it is bitwise the same whatever
// other micro-batches were accumulated before it.
//
// Dropout masks are counter-based (Philox): a function of (seed, global sample
// index, site, element) only, independent of how samples are grouped.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "adamant/core/buffer.h"
#include "adamant/core/param_spec.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dropout.h"
#include "adamant/model/activations.h"
#include "adamant/model/gpt_config.h"
#include "adamant/model/param_layout.h"

namespace adamant::model {

struct MicroBatch {
  std::span<const std::int32_t> tokens;   // [batch_size, seq_length], ids in [0, vocab_size)
  std::span<const std::int32_t> targets;  // same shape: the next token of each position
  int batch_size = 0;
  std::uint64_t first_sample_index = 0;  // global index of the first sample (dropout masks)
};

using GradReadyFn = std::function<void(std::size_t param_index)>;

class GptModel {
 public:
  // Runs on the CPU (CUDA model kernels do not exist yet: a CUDA device is an error).
  // padded_numel: the flat weight and gradient buffers hold at least this many elements
  // (the optimizer's shard padding after the last parameter; it stays zero).
  GptModel(const GptConfig& config, DType weight_dtype, int micro_batch_size, Device device, std::uint64_t seed,
           std::size_t padded_numel = 0);

  const GptConfig& config() const { return config_; }
  const ParamList& params() const { return params_; }
  int micro_batch_size() const { return micro_batch_size_; }
  DType weight_dtype() const { return weight_dtype_; }
  DType grad_dtype() const { return compute_dtype_; }

  Tensor weights();  // flat, weight_dtype, every parameter at its ParamSpec::offset (buffer_numel() elements)
  Tensor grads();    // flat, fp32 (fp64 for fp64 weights), same offsets, accumulated over micro-batches
  std::size_t buffer_numel() const { return buffer_numel_; }

  // normal(0, init_method_std) weights, output projections std / sqrt(2 * num_layers), biases 0,
  // layernorm weight 1 / bias 0; a function of (seed, config) only. Called by the constructor.
  void init_weights();
  void zero_grads();

  // Forward and backward of one micro-batch (batch_size <= micro_batch_size, seq_length tokens
  // each, dropout on). Returns the mean cross-entropy over its tokens and adds
  // d(loss_scale * mean loss)/dw into grads(). on_grad_ready, when set, is called once per
  // parameter as soon as its gradient is final in grads(), in the flat layout's order
  // (final layernorm first, the tied word embedding last).
  double forward_backward(const MicroBatch& batch, float loss_scale, const GradReadyFn& on_grad_ready = {});

  // Mean cross-entropy without gradients and without dropout (validation).
  double forward_loss(const MicroBatch& batch);

  // Logits over the padded vocabulary of the last position of one sequence of
  // 1..seq_length tokens (no dropout). logits.size() must be padded_vocab_size().
  void next_token_logits(std::span<const std::int32_t> tokens, std::span<float> logits);

 private:
  struct Pass {  // what forward ran on, for backward
    int batch = 0;
    int seq = 0;
    const std::int32_t* tokens = nullptr;
    std::uint64_t first_sample = 0;
    bool training = false;
  };

  void check_batch(const MicroBatch& batch, const char* what) const;
  void refresh_working_weights();
  void forward(const Pass& pass);
  void backward(const Pass& pass, const GradReadyFn& on_grad_ready);
  double classifier(const Pass& pass, const std::int32_t* targets, double grad_scale, bool with_grad);
  void finish_grad(std::size_t param, const GradReadyFn& on_grad_ready);

  Tensor act(const Region& region, std::size_t count);
  Tensor weight(std::size_t param);
  Tensor micro_grad(std::size_t param);
  kernels::DropoutArgs dropout_at(const Pass& pass, float probability, std::uint32_t site) const;

  GptConfig config_;
  ParamList params_;
  GptParamIndex index_;
  DType weight_dtype_;
  DType compute_dtype_;  // activations and gradients: f32, or f64 for f64 weights
  int micro_batch_size_;
  Device device_;
  std::uint64_t seed_;
  std::size_t buffer_numel_;
  ActivationLayout layout_;
  Stream stream_;

  Buffer weights_;
  Buffer working_weights_;  // compute-dtype copy of 16-bit weights; empty when weights are f32/f64
  Buffer grads_;
  Buffer micro_grads_;  // this micro-batch's gradient before it joins grads_
  Buffer activations_;
};

}  // namespace adamant::model
