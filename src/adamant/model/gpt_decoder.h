#pragma once
// Autoregressive decoding with a key/value cache: a prompt runs once through the
// model (flash attention over its tokens) and leaves every layer's keys and values in
// the cache; each later token is one row per sequence through the layers, attending to
// the cache (kernels/decode.h), instead of the whole prefix again.
//
// Several sequences decode as a batch, each at its own length. A step reads every weight
// once for a few rows, so its speed is memory bandwidth: the linear layers and the
// classifier are matrix-vector kernels (kernels/decode.h's decode_linear) on bf16 weights,
// with the bias, GELU and residual in their epilogues. The same code runs on both backends:
// fp32 activations on the CPU (with a bf16 copy of the model's weights made here, or the
// fp32 weights themselves), bf16 weights and activations on a GPU, where the kernels of a
// step are recorded once and replayed as a CUDA graph (core/step_graph.h). Sampling needs
// only the few largest logits of each sequence: select_top() picks them on the device and
// copies k pairs to the host instead of the vocabulary. All memory is allocated in the
// constructor.
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
  // matrix_dtype: the dtype the linear layers and the classifier read, bf16 (half the bytes of
  // fp32; on the CPU a copy of the weights as they are now) or, on the CPU, fp32.
  GptDecoder(GptModel& model, int batch, int max_prompt_tokens, int capacity, DType matrix_dtype = DType::bf16);
  GptDecoder(const GptDecoder&) = delete;
  GptDecoder& operator=(const GptDecoder&) = delete;

  int batch() const { return batch_; }
  int capacity() const { return capacity_; }
  int length(int row) const { return lengths_.at(static_cast<std::size_t>(row)); }
  int padded_vocab() const { return vocab_; }
  // Whether steps replay a recorded CUDA graph (after the second step on a GPU).
  bool step_graph_recorded() const { return step_graph_.recorded(); }

  // Sequence `row` starts over with `prompt` (1..max_prompt_tokens ids): it fills cache positions
  // [0, prompt.size()) and logits(row) becomes the prediction after its last token.
  void prefill(int row, std::span<const std::int32_t> prompt);

  // Every sequence b takes tokens[b] at position length(b) (which must be below capacity);
  // logits(b) becomes the prediction after it. Sequences that are done still take a token (any id),
  // so that the step stays the same work every time.
  void step(std::span<const std::int32_t> tokens);

  // Logits over the padded vocabulary after the last prefill or step of `row` (host memory).
  std::span<const float> logits(int row);

  // The k largest logits below `vocab` of every sequence (after its last prefill or step),
  // largest first, equal ones by lower id; `masked` (-1: none) is left out. 1 <= k <=
  // kernels::kMaxDecodeTopK. Then candidates(row) holds sequence row's k.
  void select_top(int k, int vocab, std::int32_t masked);
  struct Candidates {
    std::span<const float> logits;
    std::span<const std::int32_t> ids;
  };
  Candidates candidates(int row) const;

 private:
  Tensor weight(std::size_t param) const;                 // the model's, in its dtype
  Tensor matrix(std::size_t param) const;                 // a linear layer's or the classifier's, in matrix_dtype
  Tensor layer_cache(int layer) const;                    // [batch, capacity, 3 * hidden]
  Tensor cache_of(int layer, int row, int tokens) const;  // [tokens, 3 * hidden] of one sequence from position 0
  Tensor activation(std::size_t offset, std::size_t numel) const;
  // The transformer layers on `rows` rows of x (in place); attend(layer, ln, attention) runs a
  // layer's QKV projection and attention from its layernorm output.
  template <typename Attend>
  void run_layers(std::size_t rows, Attend&& attend);
  // The final layernorm and the logits of `rows` rows into the logits of sequences first_row...
  void final_logits(const Tensor& x_rows, int first_row, int rows);
  void step_kernels();

  GptModel& model_;
  GptConfig config_;
  GptParamIndex index_;
  Device device_;
  DType activation_dtype_;
  DType matrix_dtype_;
  int batch_;
  int max_prompt_;
  int capacity_;
  int vocab_;
  std::size_t rows_;  // rows of the work buffers: max(batch, max_prompt_tokens)

  // Offsets (bytes) of the work regions in work_.
  std::size_t x_ = 0, ln_ = 0, qkv_ = 0, attention_ = 0, residual_ = 0, fc_gelu_ = 0;
  std::size_t mean_ = 0, rstd_ = 0, logsumexp_ = 0, logits_ = 0, top_logits_ = 0, top_ids_ = 0;

  Buffer matrices_;  // the weights in matrix_dtype where the model's are another dtype; else empty
  Buffer cache_;     // [layers, batch, capacity, 3, heads, head_dim]
  Buffer work_;
  Buffer ids_;  // i32: step tokens [batch], positions [batch], then prompt ids [max_prompt_tokens]
  std::vector<std::int32_t> host_ids_;
  std::vector<int> lengths_;
  std::vector<float> host_logits_;  // [batch, padded vocab]
  bool host_logits_current_ = false;
  int top_k_ = 0;
  std::vector<float> host_top_logits_;  // [batch, top_k_]
  std::vector<std::int32_t> host_top_ids_;
  StepGraph step_graph_;
};

}  // namespace adamant::model
