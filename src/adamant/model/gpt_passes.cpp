// GptModel's forward and backward passes, layer by layer (pre-LN blocks):
//   x = dropout(wte[tokens] + wpe)
//   per layer: h = x + dropout(proj(attention(qkv(ln1(x)))))
//              x = h + dropout(fc_proj(gelu(fc(ln2(h)))))
//   loss = cross_entropy(final_ln(x) * wte^T, targets)
#include "adamant/kernels/attention.h"
#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/embedding.h"
#include "adamant/kernels/flash_attention.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/residual.h"
#include "adamant/model/gpt_model.h"

namespace adamant::model {

namespace {

std::uint32_t attention_site(int layer) { return 1 + 3 * static_cast<std::uint32_t>(layer); }
std::uint32_t attention_residual_site(int layer) { return 2 + 3 * static_cast<std::uint32_t>(layer); }
std::uint32_t mlp_residual_site(int layer) { return 3 + 3 * static_cast<std::uint32_t>(layer); }
constexpr std::uint32_t kEmbeddingSite = 0;

}  // namespace

void GptModel::forward(const Pass& pass) {
  const std::int64_t B = pass.batch, L = pass.seq, C = config_.hidden_size, F = config_.ffn_hidden_size;
  const std::int64_t H = config_.num_attention_heads, V = config_.padded_vocab_size();
  const std::size_t N = static_cast<std::size_t>(B * L), NC = N * C, NF = N * F;
  const double eps = config_.layernorm_epsilon;
  const float hidden_p = config_.hidden_dropout;

  Tensor x = act(layout_.embedded, NC);
  kernels::embedding_forward(pass.tokens, weight(index_.word_embedding), weight(index_.position_embedding), x,
                             {B, L, C, V}, *stream_);
  kernels::dropout(x, x, B, L * C, dropout_at(pass, hidden_p, kEmbeddingSite), *stream_);
  Tensor branch = act(layout_.branch, NC);
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerActivations& a = layout_.layers[l];
    const LayerParamIndex& w = index_.layers[l];
    Tensor ln1 = act(a.ln1, NC);
    kernels::layernorm_forward(x, weight(w.ln1_weight), weight(w.ln1_bias), eps, ln1, act(a.ln1_mean, N),
                               act(a.ln1_rstd, N), {static_cast<std::int64_t>(N), C}, *stream_);
    Tensor qkv = act(a.qkv, 3 * NC);
    kernels::linear_forward(ln1, weight(w.qkv_weight), weight(w.qkv_bias), qkv, {B * L, C, 3 * C}, *stream_);
    Tensor attention = act(a.attention, NC);
    const kernels::DropoutArgs attention_dropout = dropout_at(pass, config_.attention_dropout, attention_site(l));
    if (layout_.flash_attention) {
      kernels::flash_attention_forward(qkv, attention, act(a.logsumexp, static_cast<std::size_t>(B * H * L)), Tensor{},
                                       {B, L, H, C / H}, attention_dropout, *stream_);
    } else {
      kernels::attention_forward(qkv, act(a.probs, B * H * L * L), attention, {B, L, H, C / H}, attention_dropout,
                                 *stream_);
    }
    kernels::linear_forward(attention, weight(w.proj_weight), weight(w.proj_bias), branch, {B * L, C, C}, *stream_);
    kernels::dropout(branch, branch, B, L * C, dropout_at(pass, hidden_p, attention_residual_site(l)), *stream_);
    Tensor residual_attention = act(a.residual_attention, NC);
    kernels::residual_add(x, branch, residual_attention, NC, *stream_);

    Tensor ln2 = act(a.ln2, NC);
    kernels::layernorm_forward(residual_attention, weight(w.ln2_weight), weight(w.ln2_bias), eps, ln2,
                               act(a.ln2_mean, N), act(a.ln2_rstd, N), {static_cast<std::int64_t>(N), C}, *stream_);
    Tensor fc = act(a.fc, NF);
    kernels::linear_forward(ln2, weight(w.fc_weight), weight(w.fc_bias), fc, {B * L, C, F}, *stream_);
    Tensor fc_gelu = act(a.fc_gelu, NF);
    kernels::gelu_forward(fc, fc_gelu, NF, *stream_);
    kernels::linear_forward(fc_gelu, weight(w.fc_proj_weight), weight(w.fc_proj_bias), branch, {B * L, F, C}, *stream_);
    kernels::dropout(branch, branch, B, L * C, dropout_at(pass, hidden_p, mlp_residual_site(l)), *stream_);
    x = act(a.residual_mlp, NC);
    kernels::residual_add(residual_attention, branch, x, NC, *stream_);
  }
  kernels::layernorm_forward(x, weight(index_.final_ln_weight), weight(index_.final_ln_bias), eps,
                             act(layout_.final_ln, NC), act(layout_.final_ln_mean, N), act(layout_.final_ln_rstd, N),
                             {static_cast<std::int64_t>(N), C}, *stream_);
}

void GptModel::classifier(const Pass& pass, const Tensor& targets, double grad_scale, bool with_grad) {
  const std::int64_t C = config_.hidden_size, V = config_.padded_vocab_size();
  const std::size_t N = static_cast<std::size_t>(pass.batch) * pass.seq;
  kernels::fused_classifier(act(layout_.final_ln, N * C), weight(index_.word_embedding), targets,
                            act(layout_.losses, N), act(layout_.logits_chunk, layout_.logits_chunk.numel), grad_scale,
                            with_grad ? act(layout_.d_ln, N * C) : Tensor{},
                            with_grad ? micro_grad(index_.word_embedding) : Tensor{}, false,
                            {static_cast<std::int64_t>(N), C, V}, *stream_);
}

void GptModel::backward(const Pass& pass, const GradReadyFn& on_grad_ready) {
  const std::int64_t B = pass.batch, L = pass.seq, C = config_.hidden_size, F = config_.ffn_hidden_size;
  const std::int64_t H = config_.num_attention_heads, V = config_.padded_vocab_size();
  const std::size_t N = static_cast<std::size_t>(B * L), NC = N * C, NF = N * F;
  const std::int64_t rows = B * L;
  const bool hidden_dropout = pass.training && config_.hidden_dropout > 0.0f;
  auto finish = [&](std::size_t bias, std::size_t weight_param) {
    finish_grad(bias, on_grad_ready);
    finish_grad(weight_param, on_grad_ready);
  };
  // The gradient entering a residual branch: the stream's gradient through that branch's dropout.
  Tensor d_residual = act(layout_.d_residual, NC);
  auto branch_grad = [&](std::uint32_t site) {
    if (!hidden_dropout) return d_residual;
    Tensor d_branch = act(layout_.d_branch, NC);
    kernels::dropout(d_residual, d_branch, B, L * C, dropout_at(pass, config_.hidden_dropout, site), *stream_);
    return d_branch;
  };
  Tensor d_ln = act(layout_.d_ln, NC);  // holds d(final_ln output) from the classifier

  zero(d_residual);
  const Tensor last_x =
      config_.num_layers > 0 ? act(layout_.layers.back().residual_mlp, NC) : act(layout_.embedded, NC);
  kernels::layernorm_backward(d_ln, last_x, weight(index_.final_ln_weight), act(layout_.final_ln_mean, N),
                              act(layout_.final_ln_rstd, N), d_residual, micro_grad(index_.final_ln_weight),
                              micro_grad(index_.final_ln_bias), {rows, C}, *stream_);
  finish(index_.final_ln_bias, index_.final_ln_weight);

  for (int l = config_.num_layers - 1; l >= 0; --l) {
    const LayerActivations& a = layout_.layers[l];
    const LayerParamIndex& w = index_.layers[l];
    const Tensor x_in = l == 0 ? act(layout_.embedded, NC) : act(layout_.layers[l - 1].residual_mlp, NC);

    Tensor d_fc = act(layout_.d_fc, NF);
    kernels::linear_backward(branch_grad(mlp_residual_site(l)), act(a.fc_gelu, NF), weight(w.fc_proj_weight), d_fc,
                             micro_grad(w.fc_proj_weight), micro_grad(w.fc_proj_bias), {rows, F, C}, *stream_);
    finish(w.fc_proj_bias, w.fc_proj_weight);
    kernels::gelu_backward(d_fc, act(a.fc, NF), d_fc, NF, *stream_);
    kernels::linear_backward(d_fc, act(a.ln2, NC), weight(w.fc_weight), d_ln, micro_grad(w.fc_weight),
                             micro_grad(w.fc_bias), {rows, C, F}, *stream_);
    finish(w.fc_bias, w.fc_weight);
    kernels::layernorm_backward(d_ln, act(a.residual_attention, NC), weight(w.ln2_weight), act(a.ln2_mean, N),
                                act(a.ln2_rstd, N), d_residual, micro_grad(w.ln2_weight), micro_grad(w.ln2_bias),
                                {rows, C}, *stream_);
    finish(w.ln2_bias, w.ln2_weight);

    Tensor d_attention = act(layout_.d_attention, NC);
    kernels::linear_backward(branch_grad(attention_residual_site(l)), act(a.attention, NC), weight(w.proj_weight),
                             d_attention, micro_grad(w.proj_weight), micro_grad(w.proj_bias), {rows, C, C}, *stream_);
    finish(w.proj_bias, w.proj_weight);
    Tensor d_qkv = act(layout_.d_qkv, 3 * NC);
    const kernels::DropoutArgs attention_dropout = dropout_at(pass, config_.attention_dropout, attention_site(l));
    if (layout_.flash_attention) {
      kernels::flash_attention_backward(d_attention, act(a.qkv, 3 * NC), act(a.attention, NC),
                                        act(a.logsumexp, static_cast<std::size_t>(B * H * L)), d_qkv, Tensor{},
                                        {B, L, H, C / H}, attention_dropout, *stream_);
    } else {
      const std::size_t probs = static_cast<std::size_t>(B * H * L * L);
      kernels::attention_backward(d_attention, act(a.qkv, 3 * NC), act(a.probs, probs), act(layout_.d_probs, probs),
                                  d_qkv, {B, L, H, C / H}, attention_dropout, *stream_);
    }
    kernels::linear_backward(d_qkv, act(a.ln1, NC), weight(w.qkv_weight), d_ln, micro_grad(w.qkv_weight),
                             micro_grad(w.qkv_bias), {rows, C, 3 * C}, *stream_);
    finish(w.qkv_bias, w.qkv_weight);
    kernels::layernorm_backward(d_ln, x_in, weight(w.ln1_weight), act(a.ln1_mean, N), act(a.ln1_rstd, N), d_residual,
                                micro_grad(w.ln1_weight), micro_grad(w.ln1_bias), {rows, C}, *stream_);
    finish(w.ln1_bias, w.ln1_weight);
  }

  kernels::dropout(d_residual, d_residual, B, L * C, dropout_at(pass, config_.hidden_dropout, kEmbeddingSite),
                   *stream_);
  Tensor d_position = micro_grad(index_.position_embedding);
  zero(d_position);
  kernels::embedding_backward(d_residual, pass.tokens, micro_grad(index_.word_embedding), d_position, {B, L, C, V},
                              *stream_);
  finish_grad(index_.position_embedding, on_grad_ready);
  finish_grad(index_.word_embedding, on_grad_ready);
}

}  // namespace adamant::model
