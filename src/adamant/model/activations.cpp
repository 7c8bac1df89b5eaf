#include "adamant/model/activations.h"

#include <algorithm>

namespace adamant::model {

namespace {

class Planner {
 public:
  Region take(std::size_t numel, DType dtype) {
    const Region region{total_, numel, dtype};
    const std::size_t bytes = numel * dtype_size(dtype);
    constexpr std::size_t align = ActivationLayout::kRegionAlignment;
    total_ += (bytes + align - 1) / align * align;
    return region;
  }
  std::size_t total() const { return total_; }

 private:
  std::size_t total_ = 0;  // bytes
};

}  // namespace

ActivationLayout ActivationLayout::plan(const GptConfig& config, int micro_batch_size, const ActivationDtypes& dtypes) {
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
  const std::size_t budget_rows = std::max<std::size_t>(1, dtypes.classifier_chunk_elements / vocab);
  const std::size_t chunk_rows = budget_rows >= 16 ? budget_rows / 16 * 16 : budget_rows;
  ActivationLayout layout;
  layout.flash_attention = dtypes.flash_attention;
  layout.classifier_chunk_rows = std::min(chunk_rows, tokens);

  Planner planner;
  auto act = [&](std::size_t numel) { return planner.take(numel, dtypes.activation); };
  auto stat = [&](std::size_t numel) { return planner.take(numel, dtypes.statistic); };
  layout.embedded = act(tokens * hidden);
  for (int l = 0; l < config.num_layers; ++l) {
    LayerActivations layer;
    layer.ln1 = act(tokens * hidden);
    layer.ln1_mean = stat(tokens);
    layer.ln1_rstd = stat(tokens);
    layer.qkv = act(tokens * 3 * hidden);
    if (dtypes.flash_attention) {
      layer.logsumexp = planner.take(batch * heads * seq, DType::f32);
    } else {
      layer.probs = act(probs);
    }
    layer.attention = act(tokens * hidden);
    layer.residual_attention = act(tokens * hidden);
    layer.ln2 = act(tokens * hidden);
    layer.ln2_mean = stat(tokens);
    layer.ln2_rstd = stat(tokens);
    layer.fc = act(tokens * ffn);
    layer.fc_gelu = act(tokens * ffn);
    layer.residual_mlp = act(tokens * hidden);
    layout.layers.push_back(layer);
  }
  layout.final_ln = act(tokens * hidden);
  layout.final_ln_mean = stat(tokens);
  layout.final_ln_rstd = stat(tokens);
  layout.losses = stat(tokens);
  layout.logits_chunk = stat(layout.classifier_chunk_rows * vocab);
  layout.branch = act(tokens * hidden);
  layout.d_residual = act(tokens * hidden);
  layout.d_branch = act(tokens * hidden);
  layout.d_ln = act(tokens * hidden);
  layout.d_attention = act(tokens * hidden);
  layout.d_qkv = act(tokens * 3 * hidden);
  layout.d_fc = act(tokens * ffn);
  if (!dtypes.flash_attention) layout.d_probs = act(probs);
  layout.total_bytes = planner.total();
  return layout;
}

}  // namespace adamant::model
