#pragma once
// Where every activation of one micro-batch lives: named regions of a single
// buffer planned once for the largest micro-batch (llm.c style), so forward and
// backward never allocate. The regions backward reads are "saved", one copy per
// micro-batch in flight; the rest is scratch shared by all. Regions are sized for micro_batch_size full sequences;
// a smaller batch or a shorter sequence uses the front of each region.
//
// With tensor parallelism the regions hold one rank's share: its heads, its MLP columns,
// its vocabulary rows; with sequence parallelism also its rows of the residual stream.
//
// Each region has its own dtype (on the GPU the activations are bf16 while the
// layernorm statistics and the losses stay fp32, and the classifier's logits are fp32
// or bf16), so
// offsets are in bytes and every region starts on a 256-byte boundary.
#include <cstddef>
#include <vector>

#include "adamant/core/device.h"
#include "adamant/core/dtype.h"
#include "adamant/model/gpt_config.h"

namespace adamant::model {

struct Region {
  std::size_t offset = 0;  // bytes from the start of its part (saved or scratch)
  std::size_t numel = 0;
  DType dtype = DType::f32;
  // Kept from a pass's forward for its backward: one copy per pass in flight (a pipeline stage holds
  // several micro-batches' activations). The other regions are scratch that every pass shares.
  bool saved = false;
};

// Kept from forward for backward, per layer.
struct LayerActivations {
  Region ln1, ln1_mean, ln1_rstd;  // input layernorm output and statistics
  Region qkv;                      // fused projection [tokens, 3 * hidden]
  Region logsumexp;                // flash attention's softmax logsumexp per row [batch, heads, seq]
  Region attention;                // attention output before its projection [tokens, hidden]
  Region residual_attention;       // stream after the attention block
  Region ln2, ln2_mean, ln2_rstd;  // post-attention layernorm
  Region fc, fc_gelu;              // MLP pre- and post-activation [tokens, ffn]
  Region residual_mlp;             // layer output
};

struct ActivationDtypes {
  DType activation = DType::f32;  // activations and their gradients
  DType statistic = DType::f32;   // layernorm mean/rstd, per-token losses
  DType logits = DType::f32;      // the classifier's logits chunk: the statistic dtype, or bf16 on a GPU
  // Logits per classifier chunk: a larger chunk gives the embedding-gradient GEMM a longer inner dimension.
  std::size_t classifier_chunk_elements = std::size_t{1} << 23;
  // Where the kernels run: the GPU's embedding backward sorts in a scratch of its own.
  Device device = Device::cpu();
};

struct ActivationLayout {
  Region embedded;  // embedding output (after dropout)
  std::vector<LayerActivations> layers;
  Region final_ln, final_ln_mean, final_ln_rstd;
  Region losses;        // per token
  Region logits_chunk;  // [classifier_chunk_rows, this rank's share of the padded vocab]
  // Tensor parallelism only: per-row logsumexp and target logit over this rank's vocabulary
  // [2, tokens], every rank's copy of them [tp, 2, tokens], and the whole vocabulary's logsumexp.
  Region classifier_stats, classifier_gathered, classifier_lse;
  Region embedding_grad_scratch;  // the embedding backward's sort (fp32 elements; empty on the CPU)
  Region branch;                  // a block's output before the residual add
  // Backward scratch, reused by every layer.
  Region d_residual, d_branch, d_ln, d_attention, d_qkv, d_fc;
  std::size_t classifier_chunk_rows = 0;
  std::size_t saved_bytes = 0;    // one pass's saved regions
  std::size_t scratch_bytes = 0;  // the shared scratch

  static constexpr std::size_t kRegionAlignment = 256;  // bytes: 128-bit loads and cache lines on both devices

  // The buffer for `passes_in_flight` passes: their saved parts side by side, then the scratch.
  std::size_t total_bytes(int passes_in_flight = 1) const {
    return static_cast<std::size_t>(passes_in_flight) * saved_bytes + scratch_bytes;
  }

  // For `layers` layers (one model chunk's; the embedding output and the head's regions are always planned).
  static ActivationLayout plan(const GptConfig& config, int micro_batch_size, const ActivationDtypes& dtypes,
                               int layers);
};

}  // namespace adamant::model
