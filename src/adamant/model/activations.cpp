#include "adamant/model/activations.h"

#include <algorithm>

#include "adamant/kernels/embedding.h"

namespace adamant::model {

namespace {

class Planner {
 public:
  explicit Planner(bool saved) : saved_(saved) {}
  Region take(std::size_t numel, DType dtype) {
    const Region region{total_, numel, dtype, saved_};
    const std::size_t bytes = numel * dtype_size(dtype);
    constexpr std::size_t align = ActivationLayout::kRegionAlignment;
    total_ += (bytes + align - 1) / align * align;
    return region;
  }
  std::size_t total() const { return total_; }
  // Plans the next regions over those planned since `mark` (which must no longer be in use
  // when they are); total() stays the larger of the two ends.
  void overlay_from(std::size_t mark) {
    overlay_end_ = std::max(overlay_end_, total_);
    total_ = mark;
  }
  void end_overlay() { total_ = std::max(total_, overlay_end_); }

 private:
  bool saved_;
  std::size_t total_ = 0;  // bytes
  std::size_t overlay_end_ = 0;
};

}  // namespace

ActivationLayout ActivationLayout::plan(const GptConfig& config, int micro_batch_size, const ActivationDtypes& dtypes,
                                        int layers) {
  const std::size_t batch = static_cast<std::size_t>(micro_batch_size);
  const std::size_t seq = static_cast<std::size_t>(config.seq_length);
  const std::size_t tokens = batch * seq;
  const std::size_t tp = static_cast<std::size_t>(config.tensor_parallel_size);
  // The residual stream's rows on this rank: all of them, or 1/tp with sequence parallelism.
  const std::size_t rows = config.sequence_parallel ? tokens / tp : tokens;
  const std::size_t hidden = static_cast<std::size_t>(config.hidden_size);
  const std::size_t heads = static_cast<std::size_t>(config.local_heads());
  const std::size_t width = heads * static_cast<std::size_t>(config.head_dim());  // this rank's attention width
  const std::size_t ffn = static_cast<std::size_t>(config.local_ffn());
  const std::size_t vocab = static_cast<std::size_t>(config.local_vocab());

  // The chunk depends on the vocabulary only (never on micro_batch_size), so a micro-batch's
  // embedding gradient, summed chunk by chunk, is the same in every model built for it.
  const std::size_t budget_rows = std::max<std::size_t>(1, dtypes.classifier_chunk_elements / vocab);
  const std::size_t chunk_rows = budget_rows >= 16 ? budget_rows / 16 * 16 : budget_rows;
  ActivationLayout layout;
  layout.classifier_chunk_rows = std::min(chunk_rows, tokens);

  Planner saved(true), scratch(false);
  auto act = [&](std::size_t numel) { return saved.take(numel, dtypes.activation); };
  auto stat = [&](std::size_t numel) { return saved.take(numel, dtypes.statistic); };
  auto scratch_act = [&](std::size_t numel) { return scratch.take(numel, dtypes.activation); };
  auto scratch_stat = [&](std::size_t numel) { return scratch.take(numel, dtypes.statistic); };
  // Layernorm outputs are whole ([tokens, hidden]): with sequence parallelism each rank writes its
  // rows and the all-gather fills in the rest, which the next GEMM and its weight gradient read.
  layout.embedded = act(rows * hidden);
  // With selective recomputation one GELU output serves every layer: written in forward and
  // read at once by the next GEMM, rewritten in backward just before its weight gradient.
  const Region shared_gelu = config.recompute_activation ? scratch_act(tokens * ffn) : Region{};
  for (int l = 0; l < layers; ++l) {
    LayerActivations layer;
    layer.ln1 = act(tokens * hidden);
    layer.ln1_mean = stat(rows);
    layer.ln1_rstd = stat(rows);
    layer.qkv = act(tokens * 3 * width);
    layer.logsumexp = stat(batch * heads * seq);  // flash attention keeps O(seq) per head, no probabilities
    layer.attention = act(tokens * width);
    layer.residual_attention = act(rows * hidden);
    layer.ln2 = act(tokens * hidden);
    layer.ln2_mean = stat(rows);
    layer.ln2_rstd = stat(rows);
    layer.fc = act(tokens * ffn);
    layer.fc_gelu = config.recompute_activation ? shared_gelu : act(tokens * ffn);
    layer.residual_mlp = act(rows * hidden);
    layout.layers.push_back(layer);
  }
  layout.final_ln = act(tokens * hidden);
  layout.final_ln_mean = stat(rows);
  layout.final_ln_rstd = stat(rows);
  // The classifier runs at the start of backward (or after forward when there is none): its
  // regions are scratch. It reads final_ln and writes d_ln and the losses; the logits share
  // their memory with the scratch of the blocks' forward and backward passes (and of the
  // embedding backward), which run before or after it, never during.
  layout.losses = scratch_stat(tokens);
  if (tp > 1) {  // the vocabulary-parallel cross-entropy's per-row statistics
    layout.classifier_stats = scratch_stat(2 * tokens);
    layout.classifier_gathered = scratch_stat(tp * 2 * tokens);
    layout.classifier_lse = scratch_stat(tokens);
  }
  layout.d_residual = scratch_act(rows * hidden);
  layout.d_ln = scratch_act(tokens * hidden);
  const std::size_t classifier_overlay = scratch.total();
  // At least one row of statistics too: next_token_logits writes a row of fp32 logits there.
  const std::size_t logits_numel =
      std::max(layout.classifier_chunk_rows * vocab, vocab * dtype_size(dtypes.statistic) / dtype_size(dtypes.logits));
  layout.logits_chunk = scratch.take(logits_numel, dtypes.logits);
  scratch.overlay_from(classifier_overlay);
  layout.d_branch = scratch_act(tokens * hidden);
  // The embedding backward, last of all, reads d_residual or d_branch: its sort lies over the rest.
  const std::size_t embedding_overlay = scratch.total();
  layout.branch = scratch_act(tokens * hidden);  // whole: a row-parallel GEMM's partial sums before their reduction
  layout.d_attention = scratch_act(tokens * width);
  layout.d_qkv = scratch_act(tokens * 3 * width);
  layout.d_fc = scratch_act(tokens * ffn);
  scratch.overlay_from(embedding_overlay);
  layout.embedding_grad_scratch =
      scratch.take(static_cast<std::size_t>(kernels::embedding_backward_scratch_floats(
                       dtypes.device, static_cast<std::int64_t>(tokens), static_cast<std::int64_t>(hidden))),
                   DType::f32);
  scratch.end_overlay();
  layout.saved_bytes = saved.total();
  layout.scratch_bytes = scratch.total();
  return layout;
}

}  // namespace adamant::model
