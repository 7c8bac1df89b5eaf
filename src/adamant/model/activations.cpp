#include "adamant/model/activations.h"

#include <algorithm>

namespace adamant::model {

namespace {

// About 8M logits per chunk (32 MiB in fp32): large enough that the embedding-gradient
// GEMM has a long inner dimension, small enough never to hold all rows' logits.
constexpr std::size_t kClassifierChunkElements = std::size_t{1} << 23;
constexpr std::size_t kRegionAlignment = 64;  // elements: keeps every region cache-line aligned

class Planner {
 public:
  Region take(std::size_t numel) {
    const Region region{total_, numel};
    total_ += (numel + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
    return region;
  }
  std::size_t total() const { return total_; }

 private:
  std::size_t total_ = 0;
};

}  // namespace

ActivationLayout ActivationLayout::plan(const GptConfig& config, int micro_batch_size) {
  const std::size_t batch = static_cast<std::size_t>(micro_batch_size);
  const std::size_t seq = static_cast<std::size_t>(config.seq_length);
  const std::size_t tokens = batch * seq;
  const std::size_t hidden = static_cast<std::size_t>(config.hidden_size);
  const std::size_t ffn = static_cast<std::size_t>(config.ffn_hidden_size);
  const std::size_t heads = static_cast<std::size_t>(config.num_attention_heads);
  const std::size_t vocab = static_cast<std::size_t>(config.padded_vocab_size());
  const std::size_t probs = batch * heads * seq * seq;

  // The chunk depends on the vocabulary only (never on micro_batch_size), so a micro-batch's
  // embedding gradient, summed chunk by chunk, is the same in every model built for it.
  const std::size_t budget_rows = std::max<std::size_t>(1, kClassifierChunkElements / vocab);
  const std::size_t chunk_rows = budget_rows >= 16 ? budget_rows / 16 * 16 : budget_rows;
  ActivationLayout layout;
  layout.classifier_chunk_rows = std::min(chunk_rows, tokens);

  Planner planner;
  layout.embedded = planner.take(tokens * hidden);
  for (int l = 0; l < config.num_layers; ++l) {
    LayerActivations layer;
    layer.ln1 = planner.take(tokens * hidden);
    layer.ln1_mean = planner.take(tokens);
    layer.ln1_rstd = planner.take(tokens);
    layer.qkv = planner.take(tokens * 3 * hidden);
    layer.probs = planner.take(probs);
    layer.attention = planner.take(tokens * hidden);
    layer.residual_attention = planner.take(tokens * hidden);
    layer.ln2 = planner.take(tokens * hidden);
    layer.ln2_mean = planner.take(tokens);
    layer.ln2_rstd = planner.take(tokens);
    layer.fc = planner.take(tokens * ffn);
    layer.fc_gelu = planner.take(tokens * ffn);
    layer.residual_mlp = planner.take(tokens * hidden);
    layout.layers.push_back(layer);
  }
  layout.final_ln = planner.take(tokens * hidden);
  layout.final_ln_mean = planner.take(tokens);
  layout.final_ln_rstd = planner.take(tokens);
  layout.losses = planner.take(tokens);
  layout.logits_chunk = planner.take(layout.classifier_chunk_rows * vocab);
  layout.branch = planner.take(tokens * hidden);
  layout.d_residual = planner.take(tokens * hidden);
  layout.d_branch = planner.take(tokens * hidden);
  layout.d_ln = planner.take(tokens * hidden);
  layout.d_attention = planner.take(tokens * hidden);
  layout.d_qkv = planner.take(tokens * 3 * hidden);
  layout.d_fc = planner.take(tokens * ffn);
  layout.d_probs = planner.take(probs);
  layout.total_numel = planner.total();
  return layout;
}

}  // namespace adamant::model
