#pragma once
// Autoregressive decoding with a key/value cache: a prompt runs once through the
// model (flash attention over its tokens) and leaves every layer's keys and values in
// the cache; each later token is one row per sequence through the layers, attending to
// the cache (kernels/decode.h), instead of the whole prefix again.
//
// Several sequences decode as a batch, each at its own length. The same code runs on
// both backends: fp32 weights on the CPU, bf16 weights and activations on a GPU, where
// the kernels of a decoding step are recorded once and replayed as a CUDA graph
// (core/step_graph.h). All memory is allocated in the constructor.
#include <cstdint>
#include <span>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/step_graph.h"
#include "adamant/core/tensor.h"
#include "adamant/model/gpt_model.h"
#include "adamant/model/param_layout.h"

namespace adamant::model {

class GptDecoder {
 public:
  // `model` (tensor_parallel_size 1, fp32 weights on the CPU or bf16 on a GPU) must outlive the
  // decoder; it is only read. batch: sequences decoded together; max_prompt_tokens: the longest
  // prompt; capacity: positions cached per sequence (at most the model's seq_length).
  GptDecoder(GptModel& model, int batch, int max_prompt_tokens, int capacity);
  GptDecoder(const GptDecoder&) = delete;
  GptDecoder& operator=(const GptDecoder&) = delete;

  int batch() const { return batch_; }
  int capacity() const { return capacity_; }
  int length(int row) const { return lengths_.at(static_cast<std::size_t>(row)); }
  int padded_vocab() const { return vocab_; }

  // Sequence `row` starts over with `prompt` (1..max_prompt_tokens ids): it fills cache positions
  // [0, prompt.size()) and logits(row) becomes the prediction after its last token.
  void prefill(int row, std::span<const std::int32_t> prompt);

  // Every sequence b takes tokens[b] at position length(b) (which must be below capacity);
  // logits(b) becomes the prediction after it. Sequences that are done still take a token (any id),
  // so that the step stays the same work every time.
  void step(std::span<const std::int32_t> tokens);

  // Logits over the padded vocabulary after the last prefill or step of `row` (host memory).
  std::span<const float> logits(int row) const;

 private:
  Tensor weight(std::size_t param) const;
  Tensor layer_cache(int layer) const;                    // [batch, capacity, 3 * hidden]
  Tensor cache_of(int layer, int row, int tokens) const;  // [tokens, 3 * hidden] of one sequence from position 0
  Tensor activation(std::size_t offset, std::size_t numel) const;
  // The transformer layers on `rows` rows of x (in place); attend(layer, ln, attention) runs a
  // layer's QKV projection and attention from its layernorm output.
  template <typename Attend>
  void run_layers(std::size_t rows, Attend&& attend);
  // The final layernorm and the logits of `logit_rows` rows into the logits region.
  void final_logits(const Tensor& x_rows, std::size_t logit_rows);
  void step_kernels();
  void copy_logits_to_host(int first_row, int rows);

  GptModel& model_;
  GptConfig config_;
  GptParamIndex index_;
  Device device_;
  DType activation_dtype_;
  int batch_;
  int max_prompt_;
  int capacity_;
  int vocab_;
  std::size_t rows_;  // rows of the work buffers: max(batch, max_prompt_tokens)

  // Offsets (bytes) of the work regions in work_.
  std::size_t x_ = 0, ln_ = 0, qkv_ = 0, attention_ = 0, branch_ = 0, residual_ = 0, fc_ = 0, fc_gelu_ = 0;
  std::size_t mean_ = 0, rstd_ = 0, logsumexp_ = 0, probs_ = 0, logits_ = 0;
  std::size_t probs_numel_ = 0;

  Buffer cache_;  // [layers, batch, capacity, 3, heads, head_dim]
  Buffer work_;
  Buffer ids_;  // i32: step tokens [batch], positions [batch], then prompt ids [max_prompt_tokens]
  std::vector<std::int32_t> host_ids_;
  std::vector<int> lengths_;
  std::vector<float> host_logits_;  // [batch, padded vocab]
  StepGraph step_graph_;
};

}  // namespace adamant::model
