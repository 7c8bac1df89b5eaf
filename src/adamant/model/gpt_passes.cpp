// GptModel's forward and backward passes, layer by layer (pre-LN blocks):
//   x = dropout(wte[tokens] + wpe)
//   per layer: h = x + dropout(proj(attention(qkv(ln1(x)))))
//              x = h + dropout(fc_proj(gelu(fc(ln2(h)))))
//   loss = cross_entropy(final_ln(x) * wte^T, targets)
//
// With tensor parallelism every GEMM works on this rank's share of the weights: qkv, fc and
// the logits are column-parallel (all the rows in, this rank's columns out), proj and fc_proj
// row-parallel (partial sums over the group, reduced by reduce_rows). The residual stream x, h
// and the layernorms hold local_rows() rows: all of them, or 1/tp with sequence parallelism, where
// layernorm_rows gathers the rows that the next GEMM needs and reduce_rows scatters the sums.
#include <initializer_list>

#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/embedding.h"
#include "adamant/kernels/flash_attention.h"
#include "adamant/kernels/gelu.h"
#include "adamant/kernels/layernorm.h"
#include "adamant/kernels/linear.h"
#include "adamant/kernels/linear_gelu.h"
#include "adamant/kernels/residual.h"
#include "adamant/kernels/residual_layernorm.h"
#include "adamant/model/gpt_model.h"

namespace adamant::model {

namespace {

constexpr std::uint32_t kEmbeddingSite = 0;
std::uint32_t attention_residual_site(int layer) { return 2 + 3 * static_cast<std::uint32_t>(layer); }
std::uint32_t mlp_residual_site(int layer) { return 3 + 3 * static_cast<std::uint32_t>(layer); }
// A tensor-parallel rank's heads draw their attention dropout from a site of their own.
constexpr int kTensorParallelSiteShift = 20;
std::uint32_t attention_site(int layer, int tp_rank) {
  return (1 + 3 * static_cast<std::uint32_t>(layer)) +
         (static_cast<std::uint32_t>(tp_rank) << kTensorParallelSiteShift);
}

}  // namespace

Tensor GptModel::layernorm_rows(const Pass& pass, const Tensor& in, const NormAt& norm) {
  const std::size_t C = static_cast<std::size_t>(config_.hidden_size);
  const std::size_t rows = local_rows(pass);
  Tensor all_rows = act(*norm.out, static_cast<std::size_t>(pass.batch) * pass.seq * C);
  const Tensor mine = all_rows.slice(first_row(pass) * C, rows * C);
  kernels::layernorm_forward(in, weight(norm.weight_param), weight(norm.bias_param), config_.layernorm_epsilon, mine,
                             act(*norm.mean, rows), act(*norm.rstd, rows),
                             {static_cast<std::int64_t>(rows), config_.hidden_size}, *stream_);
  if (config_.sequence_parallel) tp_all_gather(mine, all_rows);
  return all_rows;
}

Tensor GptModel::residual_layernorm_rows(const Pass& pass, const Tensor& x, const Tensor& branch, std::uint32_t site,
                                         Tensor residual, const NormAt& norm) {
  const std::size_t C = static_cast<std::size_t>(config_.hidden_size);
  const std::size_t rows = local_rows(pass);
  Tensor all_rows = act(*norm.out, static_cast<std::size_t>(pass.batch) * pass.seq * C);
  const Tensor mine = all_rows.slice(first_row(pass) * C, rows * C);
  const kernels::DroppedBranch dropped{branch, dropout_at(pass, config_.hidden_dropout, site, first_row(pass) * C),
                                       static_cast<std::int64_t>(pass.seq) * config_.hidden_size};
  kernels::residual_layernorm_forward(
      x, dropped, residual, {weight(norm.weight_param), weight(norm.bias_param), config_.layernorm_epsilon}, mine,
      act(*norm.mean, rows), act(*norm.rstd, rows), {static_cast<std::int64_t>(rows), config_.hidden_size}, *stream_);
  if (config_.sequence_parallel) tp_all_gather(mine, all_rows);
  return all_rows;
}

Tensor GptModel::reduce_rows(const Pass& pass, Tensor partial) {
  if (tensor_parallel_ == nullptr) return partial;
  if (!config_.sequence_parallel) {
    tp_all_reduce(partial);
    return partial;
  }
  const std::size_t n = local_rows(pass) * static_cast<std::size_t>(config_.hidden_size);
  Tensor mine = partial.slice(first_row(pass) * config_.hidden_size, n);
  tensor_parallel_->order_after(*stream_);
  tensor_parallel_->reduce_scatter_async(partial, mine, comm::ReduceOp::sum).wait(*stream_);
  return mine;
}

Tensor GptModel::branch_grad(const Pass& pass, std::uint32_t site, Tensor d_bias) {
  const std::int64_t C = config_.hidden_size;
  const auto rows = static_cast<std::int64_t>(local_rows(pass));
  const std::int64_t sample_numel = static_cast<std::int64_t>(pass.seq) * C;
  const kernels::DropoutArgs args = dropout_at(pass, config_.hidden_dropout, site, first_row(pass) * C);
  Tensor d_residual = act(layout_.d_residual, static_cast<std::size_t>(rows * C));
  const bool with_bias = d_bias.data != nullptr;
  if (!config_.sequence_parallel) {
    if (args.probability <= 0.0f) {
      if (with_bias) kernels::bias_grad(d_residual, d_bias, rows, C, workspace_, *stream_);
      return d_residual;
    }
    Tensor d_branch = act(layout_.d_branch, static_cast<std::size_t>(rows * C));
    kernels::dropout(d_residual, d_branch, rows * C, sample_numel, args, *stream_, {d_bias, C, &workspace_});
    return d_branch;
  }
  const std::int64_t all = static_cast<std::int64_t>(pass.batch) * pass.seq;
  Tensor all_rows = act(layout_.d_branch, static_cast<std::size_t>(all * C));
  const Tensor mine = all_rows.slice(first_row(pass) * C, static_cast<std::size_t>(rows * C));
  kernels::dropout(d_residual, mine, rows * C, sample_numel, args, *stream_);
  tp_all_gather(mine, all_rows);
  if (with_bias) kernels::bias_grad(all_rows, d_bias, all, C, workspace_, *stream_);
  return all_rows;
}

Tensor GptModel::seam_backward(const Pass& pass, const Tensor& d_ln_sums, const Tensor& x, const NormAt& norm,
                               const std::optional<BranchAt>& below) {
  const std::int64_t C = config_.hidden_size;
  const auto rows = static_cast<std::int64_t>(local_rows(pass));
  const std::size_t RC = static_cast<std::size_t>(rows * C);
  Tensor d_residual = act(layout_.d_residual, RC);
  const Tensor d_out = reduce_rows(pass, d_ln_sums);
  const Tensor mean = act(*norm.mean, static_cast<std::size_t>(rows));
  const Tensor rstd = act(*norm.rstd, static_cast<std::size_t>(rows));
  if (!below || config_.sequence_parallel) {  // the branch's rows are gathered before its gradient is summed
    kernels::layernorm_backward(d_out, x, weight(norm.weight_param), mean, rstd, d_residual,
                                micro_grad(pass, norm.weight_param), micro_grad(pass, norm.bias_param), {rows, C},
                                workspace_, *stream_);
    return below ? branch_grad(pass, below->site, below->d_bias) : Tensor{};
  }
  const kernels::DropoutArgs args = dropout_at(pass, config_.hidden_dropout, below->site, first_row(pass) * C);
  const Tensor d_branch = args.probability > 0.0f ? act(layout_.d_branch, RC) : d_residual;
  kernels::residual_layernorm_backward(d_out, x, weight(norm.weight_param), mean, rstd, d_residual,
                                       micro_grad(pass, norm.weight_param), micro_grad(pass, norm.bias_param),
                                       {d_branch, args, static_cast<std::int64_t>(pass.seq) * C, below->d_bias},
                                       {rows, C}, workspace_, *stream_);
  return d_branch;
}

Tensor GptModel::embed(const Pass& pass) {
  const std::int64_t B = pass.batch, L = pass.seq, C = config_.hidden_size, V = config_.local_vocab();
  const std::size_t rows = local_rows(pass);
  Tensor x = act(layout_.embedded, rows * C);
  // Each rank looks up the tokens of its vocabulary rows (others give zeros) and rank 0 adds the
  // positions; the sum over the group is the whole embedding.
  const kernels::EmbeddingShape shape{B, L, C, V, static_cast<std::int64_t>(tp_rank_) * V};
  Tensor all_rows = tensor_parallel_ == nullptr ? x : act(layout_.branch, static_cast<std::size_t>(B * L * C));
  const GptParamIndex& index = pass.chunk->index;
  const Tensor position = tp_rank_ == 0 ? weight(index.position_embedding) : Tensor{};
  kernels::embedding_forward(pass.tokens, weight(index.word_embedding), position, all_rows, shape, *stream_);
  const Tensor mine = reduce_rows(pass, all_rows);
  kernels::dropout(mine, x, static_cast<std::int64_t>(rows * C), L * C,
                   dropout_at(pass, config_.hidden_dropout, kEmbeddingSite, first_row(pass) * C), *stream_);
  return x;
}

void GptModel::forward(const Pass& pass, const std::function<void(std::size_t param)>& before_read) {
  const std::int64_t B = pass.batch, L = pass.seq, C = config_.hidden_size, F = config_.local_ffn();
  const std::int64_t H = config_.local_heads(), D = config_.head_dim(), W = H * D;  // W: this rank's attention width
  const std::size_t N = static_cast<std::size_t>(B * L), rows = local_rows(pass);
  const std::size_t NC = N * C, RC = rows * C, NW = N * W, NF = N * F;
  const std::uint64_t first_element = first_row(pass) * C;

  const ModelChunk& chunk = pass.chunk->layers;
  const GptParamIndex& index = pass.chunk->index;
  // The weights each kernel below reads, reported before it is issued: in order of first use.
  auto need = [&before_read](std::initializer_list<std::size_t> params) {
    if (!before_read) return;
    for (const std::size_t param : params) before_read(param);
  };
  if (chunk.has_embedding) need({index.word_embedding, index.position_embedding});
  // A chunk without the embedding starts from the previous stage's output, received into its place.
  Tensor x = chunk.has_embedding ? embed(pass) : act(layout_.embedded, RC);
  Tensor branch_sums = act(layout_.branch, NC);
  auto ln1_of = [&](int i) {
    const LayerActivations& a = layout_.layers[i];
    need({index.layers[i].ln1_weight, index.layers[i].ln1_bias});
    return NormAt{index.layers[i].ln1_weight, index.layers[i].ln1_bias, &a.ln1, &a.ln1_mean, &a.ln1_rstd};
  };
  auto final_norm = [&] {
    need({index.final_ln_weight, index.final_ln_bias});
    return NormAt{index.final_ln_weight, index.final_ln_bias, &layout_.final_ln, &layout_.final_ln_mean,
                  &layout_.final_ln_rstd};
  };
  // The chunk's first layernorm reads its input; every later one is made with the residual
  // add before it.
  Tensor ln1 = chunk.num_layers > 0 ? layernorm_rows(pass, x, ln1_of(0)) : Tensor{};
  for (int i = 0; i < chunk.num_layers; ++i) {
    const int l = chunk.first_layer + i;  // dropout sites are the whole model's layer numbers
    const LayerActivations& a = layout_.layers[i];
    const LayerParamIndex& w = index.layers[i];
    Tensor qkv = act(a.qkv, 3 * NW);
    need({w.qkv_weight, w.qkv_bias});
    kernels::linear_forward(ln1, weight(w.qkv_weight), weight(w.qkv_bias), qkv, {B * L, C, 3 * W}, workspace_,
                            *stream_);
    Tensor attention = act(a.attention, NW);
    const kernels::DropoutArgs attention_dropout =
        dropout_at(pass, config_.attention_dropout, attention_site(l, tp_rank_));
    kernels::flash_attention_forward(qkv, attention, act(a.logsumexp, static_cast<std::size_t>(B * H * L)),
                                     {B, L, H, D}, attention_dropout, *stream_);
    need({w.proj_weight, w.proj_bias});
    kernels::linear_forward(attention, weight(w.proj_weight), row_parallel_bias(w.proj_bias), branch_sums,
                            {B * L, W, C}, workspace_, *stream_);
    Tensor residual_attention = act(a.residual_attention, RC);
    need({w.ln2_weight, w.ln2_bias});
    const Tensor ln2 =
        residual_layernorm_rows(pass, x, reduce_rows(pass, branch_sums), attention_residual_site(l), residual_attention,
                                {w.ln2_weight, w.ln2_bias, &a.ln2, &a.ln2_mean, &a.ln2_rstd});

    Tensor fc = act(a.fc, NF);
    Tensor fc_gelu = act(a.fc_gelu, NF);
    need({w.fc_weight, w.fc_bias});
    if (config_.fuses_bias_gelu()) {
      kernels::linear_gelu_forward(ln2, weight(w.fc_weight), weight(w.fc_bias), fc, fc_gelu, {B * L, C, F},
                                   config_.gelu(), workspace_, *stream_);
    } else {
      kernels::linear_forward(ln2, weight(w.fc_weight), weight(w.fc_bias), fc, {B * L, C, F}, workspace_, *stream_);
      kernels::gelu_forward(fc, fc_gelu, NF, config_.gelu(), *stream_);
    }
    need({w.fc_proj_weight, w.fc_proj_bias});
    kernels::linear_forward(fc_gelu, weight(w.fc_proj_weight), row_parallel_bias(w.fc_proj_bias), branch_sums,
                            {B * L, F, C}, workspace_, *stream_);
    Tensor branch = reduce_rows(pass, branch_sums);
    x = act(a.residual_mlp, RC);
    if (i + 1 < chunk.num_layers) {
      ln1 = residual_layernorm_rows(pass, residual_attention, branch, mlp_residual_site(l), x, ln1_of(i + 1));
    } else if (chunk.has_head) {
      residual_layernorm_rows(pass, residual_attention, branch, mlp_residual_site(l), x, final_norm());
    } else {  // the stage's output, which the next stage normalises
      kernels::dropout(branch, branch, static_cast<std::int64_t>(RC), L * C,
                       dropout_at(pass, config_.hidden_dropout, mlp_residual_site(l), first_element), *stream_);
      kernels::residual_add(residual_attention, branch, x, static_cast<std::int64_t>(RC), *stream_);
    }
  }
  if (chunk.has_head && chunk.num_layers == 0) layernorm_rows(pass, x, final_norm());
}

void GptModel::classifier(const Pass& pass, const Tensor& targets, double grad_scale, bool with_grad) {
  const std::int64_t C = config_.hidden_size, V = config_.local_vocab();
  const std::size_t N = static_cast<std::size_t>(pass.batch) * pass.seq;
  const Tensor x = act(layout_.final_ln, N * C);
  const Tensor scratch = act(layout_.logits_chunk, layout_.logits_chunk.numel);
  const Tensor d_x = with_grad ? act(layout_.d_ln, N * C) : Tensor{};
  const std::size_t word_embedding = pass.chunk->index.word_embedding;
  const Tensor d_embedding = with_grad ? micro_grad(pass, word_embedding) : Tensor{};
  const bool adds_d_embedding = !pass.writes_grads;  // the chunk's first gradient of the word embedding
  if (tensor_parallel_ == nullptr) {
    kernels::fused_classifier(x, weight(word_embedding), targets, act(layout_.losses, N), scratch, grad_scale, d_x,
                              d_embedding, adds_d_embedding, {static_cast<std::int64_t>(N), C, V}, workspace_,
                              *stream_);
    return;
  }
  // Vocabulary-parallel cross-entropy: each rank's per-row logsumexp and target logit over its
  // rows of the vocabulary, exchanged, combined into the loss and the whole logsumexp; then the
  // gradient over this rank's vocabulary (d_x holds this rank's part of the sum).
  const kernels::VocabParallelShape shape{static_cast<std::int64_t>(N), C, V, static_cast<std::int64_t>(tp_rank_) * V};
  const Tensor stats = act(layout_.classifier_stats, 2 * N);
  const Tensor gathered = act(layout_.classifier_gathered, static_cast<std::size_t>(tp_size()) * 2 * N);
  const Tensor lse = act(layout_.classifier_lse, N);
  kernels::vocab_parallel_classifier_stats(x, weight(word_embedding), targets, stats, scratch, shape, workspace_,
                                           *stream_);
  tp_all_gather(stats, gathered);
  kernels::vocab_parallel_combine(gathered, tp_size(), static_cast<std::int64_t>(N), act(layout_.losses, N), lse,
                                  *stream_);
  if (!with_grad) return;
  kernels::vocab_parallel_classifier_backward(x, weight(word_embedding), targets, lse, grad_scale, scratch, d_x,
                                              d_embedding, adds_d_embedding, shape, workspace_, *stream_);
}

void GptModel::backward(const Pass& pass, const GradReadyFn& on_grad_ready) {
  const std::int64_t B = pass.batch, L = pass.seq, C = config_.hidden_size, F = config_.local_ffn();
  const std::int64_t H = config_.local_heads(), D = config_.head_dim(), W = H * D, V = config_.local_vocab();
  const std::size_t N = static_cast<std::size_t>(B * L), rows = local_rows(pass);
  const std::size_t NC = N * C, RC = rows * C, NW = N * W, NF = N * F;
  auto finish = [&](std::size_t bias, std::size_t weight_param) {
    finish_grad(pass, bias, on_grad_ready);
    finish_grad(pass, weight_param, on_grad_ready);
  };
  const ModelChunk& chunk = pass.chunk->layers;
  const GptParamIndex& index = pass.chunk->index;
  // The weight-gradient GEMMs add to the gradients held, or write them (beta = 0).
  const kernels::WeightGrad weight_grad =
      pass.writes_grads ? kernels::WeightGrad::overwrite : kernels::WeightGrad::accumulate;
  Tensor d_residual = act(layout_.d_residual, RC);  // a chunk without the head: d(output), received
  Tensor d_ln_sums = act(layout_.d_ln, NC);         // holds d(final_ln output) from the classifier
  // The branch that joins the stream below layer i (below the final layernorm for i =
  // num_layers): the MLP branch of layer i - 1, or the embedding's; none at the bottom of a
  // chunk without the embedding.
  auto branch_below = [&](int i) -> std::optional<BranchAt> {
    if (i > 0)
      return BranchAt{mlp_residual_site(chunk.first_layer + i - 1), micro_grad(pass, index.layers[i - 1].fc_proj_bias)};
    if (chunk.has_embedding) return BranchAt{kEmbeddingSite, {}};
    return std::nullopt;
  };
  // The gradient of that branch, made by the layernorm backward above it (seam_backward);
  // empty at the top of a chunk without the head.
  Tensor d_branch_below;

  if (chunk.has_head) {
    zero(d_residual);
    const Tensor last_x =
        chunk.num_layers > 0 ? act(layout_.layers.back().residual_mlp, RC) : act(layout_.embedded, RC);
    d_branch_below = seam_backward(
        pass, d_ln_sums, last_x,
        {index.final_ln_weight, index.final_ln_bias, nullptr, &layout_.final_ln_mean, &layout_.final_ln_rstd},
        branch_below(chunk.num_layers));
    finish(index.final_ln_bias, index.final_ln_weight);
    // A head without the embedding (a later pipeline stage): the classifier's share is the whole
    // gradient of its copy of the word embedding.
    if (!chunk.has_embedding) finish_grad(pass, index.word_embedding, on_grad_ready);
  }

  for (int i = chunk.num_layers - 1; i >= 0; --i) {
    const int l = chunk.first_layer + i;
    const LayerActivations& a = layout_.layers[i];
    const LayerParamIndex& w = index.layers[i];
    const Tensor x_in = i == 0 ? act(layout_.embedded, RC) : act(layout_.layers[i - 1].residual_mlp, RC);

    Tensor d_fc = act(layout_.d_fc, NF);
    const Tensor d_mlp_branch = d_branch_below.data != nullptr
                                    ? d_branch_below
                                    : branch_grad(pass, mlp_residual_site(l), micro_grad(pass, w.fc_proj_bias));
    // The down projection's data gradient, then the GELU backward, then its parameter
    // gradients: with selective recomputation the GELU outputs were not kept, and the GELU
    // backward, which reads the pre-activations anyway, writes this layer's back into the
    // shared buffer before the weight gradient reads them (one more write, no recomputing pass).
    if (config_.fuses_bias_gelu()) {  // the GELU backward inside the data gradient's product
      kernels::linear_dgelu_backward(d_mlp_branch, weight(w.fc_proj_weight), act(a.fc, NF), d_fc, {B * L, F, C},
                                     config_.gelu(), workspace_, *stream_);
      kernels::bias_grad(d_fc, micro_grad(pass, w.fc_bias), B * L, F, workspace_, *stream_);
    } else {
      kernels::linear_backward(d_mlp_branch, {}, weight(w.fc_proj_weight), d_fc, {}, {}, {B * L, F, C}, workspace_,
                               *stream_);
      // The GELU backward also sums the up projection's bias gradient as it writes d_fc.
      kernels::gelu_backward(d_fc, act(a.fc, NF), d_fc, NF, config_.gelu(), *stream_,
                             config_.recompute_activation ? act(a.fc_gelu, NF) : Tensor{},
                             {micro_grad(pass, w.fc_bias), F, &workspace_});
    }
    kernels::linear_backward(d_mlp_branch, act(a.fc_gelu, NF), weight(w.fc_proj_weight), {},
                             micro_grad(pass, w.fc_proj_weight), {}, {B * L, F, C}, workspace_, *stream_, weight_grad);
    finish(w.fc_proj_bias, w.fc_proj_weight);
    kernels::linear_backward(d_fc, act(a.ln2, NC), weight(w.fc_weight), d_ln_sums, micro_grad(pass, w.fc_weight), {},
                             {B * L, C, F}, workspace_, *stream_, weight_grad);
    finish(w.fc_bias, w.fc_weight);
    const Tensor d_attention_branch = seam_backward(
        pass, d_ln_sums, act(a.residual_attention, RC), {w.ln2_weight, w.ln2_bias, nullptr, &a.ln2_mean, &a.ln2_rstd},
        BranchAt{attention_residual_site(l), micro_grad(pass, w.proj_bias)});
    finish(w.ln2_bias, w.ln2_weight);

    Tensor d_attention = act(layout_.d_attention, NW);
    kernels::linear_backward(d_attention_branch, act(a.attention, NW), weight(w.proj_weight), d_attention,
                             micro_grad(pass, w.proj_weight), {}, {B * L, W, C}, workspace_, *stream_, weight_grad);
    finish(w.proj_bias, w.proj_weight);
    Tensor d_qkv = act(layout_.d_qkv, 3 * NW);
    const kernels::DropoutArgs attention_dropout =
        dropout_at(pass, config_.attention_dropout, attention_site(l, tp_rank_));
    // The attention backward also sums the QKV bias gradient as it writes d_qkv.
    kernels::flash_attention_backward(d_attention, act(a.qkv, 3 * NW), act(a.attention, NW),
                                      act(a.logsumexp, static_cast<std::size_t>(B * H * L)), d_qkv, {B, L, H, D},
                                      attention_dropout, workspace_, *stream_,
                                      {micro_grad(pass, w.qkv_bias), 3 * W, &workspace_});
    kernels::linear_backward(d_qkv, act(a.ln1, NC), weight(w.qkv_weight), d_ln_sums, micro_grad(pass, w.qkv_weight), {},
                             {B * L, C, 3 * W}, workspace_, *stream_, weight_grad);
    finish(w.qkv_bias, w.qkv_weight);
    d_branch_below = seam_backward(pass, d_ln_sums, x_in, {w.ln1_weight, w.ln1_bias, nullptr, &a.ln1_mean, &a.ln1_rstd},
                                   branch_below(i));
    finish(w.ln1_bias, w.ln1_weight);
  }

  if (!chunk.has_embedding) {
    // d(input) for the previous stage, in the slot's input region (no longer read): the scratch is
    // the next backward's, while the send may still be reading.
    copy(d_residual, act(layout_.embedded, RC));
    return;
  }
  // Every rank has the whole gradient of the embedding output here, so each computes the same
  // position gradient and its own vocabulary rows' word gradient.
  const Tensor d_embedded = d_branch_below.data != nullptr ? d_branch_below : branch_grad(pass, kEmbeddingSite);
  // Both gradients accumulate in the gradient buffer (model_memory.h), the word embedding's after
  // the classifier's share of the tied weights when this chunk has the head. The kernel adds only
  // the rows the tokens and positions touch, so a writing pass zeroes the tables first (the word
  // embedding's only without the head, whose classifier wrote all of it).
  Tensor d_word = micro_grad(pass, index.word_embedding);
  Tensor d_position = micro_grad(pass, index.position_embedding);
  if (pass.writes_grads) {
    zero(d_position);
    if (!chunk.has_head) zero(d_word);
  }
  kernels::embedding_backward(d_embedded, pass.tokens, d_word, d_position,
                              act(layout_.embedding_grad_scratch, layout_.embedding_grad_scratch.numel),
                              {B, L, C, V, static_cast<std::int64_t>(tp_rank_) * V}, *stream_);
  finish_grad(pass, index.position_embedding, on_grad_ready);
  finish_grad(pass, index.word_embedding, on_grad_ready);
}

}  // namespace adamant::model
