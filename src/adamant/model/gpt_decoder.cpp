#include "adamant/model/gpt_decoder.h"

#include <algorithm>

#include "adamant/comm/comm_stream.h"
#include "adamant/core/error.h"
#include "adamant/kernels/decode.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/embedding.h"
#include "adamant/kernels/flash_attention.h"
#include "adamant/kernels/layernorm.h"

namespace adamant::model {

namespace {

constexpr std::size_t kAlignment = 256;

// Appends a region of `numel` elements of `dtype` to a layout of `total` bytes; returns its offset.
std::size_t place(std::size_t& total, std::size_t numel, DType dtype) {
  const std::size_t offset = total;
  total += (numel * dtype_size(dtype) + kAlignment - 1) / kAlignment * kAlignment;
  return offset;
}

}  // namespace

GptDecoder::GptDecoder(GptModel& model, int batch, int max_prompt_tokens, int capacity, DType matrix_dtype)
    : model_(model),
      config_(model.config()),
      index_(index_params(model.config(), model.params())),
      device_(model.device()),
      activation_dtype_(model.activation_dtype()),
      matrix_dtype_(matrix_dtype),
      batch_(batch),
      max_prompt_(max_prompt_tokens),
      capacity_(capacity),
      vocab_(model.config().padded_vocab_size()),
      rows_(static_cast<std::size_t>(std::max(batch, max_prompt_tokens))),
      lengths_(static_cast<std::size_t>(std::max(batch, 0)), 0),
      step_graph_(model.stream()) {
  ADAMANT_CHECK(model.tp_size() == 1,
                "decoding: the model is split over {} tensor-parallel ranks; build it with tensor_parallel_size 1",
                model.tp_size());
  const DType expected = device_.is_cpu() ? DType::f32 : DType::bf16;
  ADAMANT_CHECK(model.weight_dtype() == expected, "decoding: {} weights on {}; the decoder takes {} weights there",
                dtype_name(model.weight_dtype()), device_.str(), dtype_name(expected));
  ADAMANT_CHECK(matrix_dtype == DType::bf16 || (matrix_dtype == DType::f32 && device_.is_cpu()),
                "decoding: {} matrices on {}; use bf16 (or fp32 on the CPU)", dtype_name(matrix_dtype), device_.str());
  ADAMANT_CHECK(batch >= 1, "decoding: batch {}; give at least one sequence", batch);
  ADAMANT_CHECK(capacity >= 1 && capacity <= config_.seq_length,
                "decoding: a cache of {} positions; the model's context is 1..{} (model.encoder_seq_length)", capacity,
                config_.seq_length);
  ADAMANT_CHECK(max_prompt_tokens >= 1 && max_prompt_tokens <= capacity,
                "decoding: prompts of up to {} tokens for a cache of {} positions", max_prompt_tokens, capacity);
  ADAMANT_CHECK(config_.head_dim() <= kernels::kMaxDecodeHeadDim,
                "decoding: heads of {} dimensions; the decoding kernels take at most {}", config_.head_dim(),
                kernels::kMaxDecodeHeadDim);

  const std::size_t C = static_cast<std::size_t>(config_.hidden_size),
                    F = static_cast<std::size_t>(config_.ffn_hidden_size);
  const std::size_t H = static_cast<std::size_t>(config_.num_attention_heads),
                    P = static_cast<std::size_t>(max_prompt_);
  const DType statistic = model.grad_dtype();  // fp32: layernorm statistics, logsumexp, logits
  std::size_t total = 0;
  x_ = place(total, rows_ * C, activation_dtype_);
  ln_ = place(total, rows_ * C, activation_dtype_);
  qkv_ = place(total, static_cast<std::size_t>(batch_) * 3 * C, activation_dtype_);
  attention_ = place(total, rows_ * C, activation_dtype_);
  residual_ = place(total, rows_ * C, activation_dtype_);
  fc_gelu_ = place(total, rows_ * F, activation_dtype_);
  mean_ = place(total, rows_, statistic);
  rstd_ = place(total, rows_, statistic);
  logsumexp_ = place(total, H * P, statistic);
  logits_ = place(total, static_cast<std::size_t>(batch_) * vocab_, statistic);
  top_logits_ = place(total, static_cast<std::size_t>(batch_) * kernels::kMaxDecodeTopK, DType::f32);
  top_ids_ = place(total, static_cast<std::size_t>(batch_) * kernels::kMaxDecodeTopK, DType::i32);
  work_ = Buffer(total, device_);
  if (model.weight_dtype() != matrix_dtype_) {  // e.g. bf16 matrices of an fp32 model on the CPU
    matrices_ = Buffer(model.buffer_numel() * dtype_size(matrix_dtype_), device_);
    kernels::cast(model.weights(), Tensor::flat(matrices_.data(), matrix_dtype_, device_, model.buffer_numel()),
                  model.stream());
  }
  cache_ =
      Buffer(static_cast<std::size_t>(config_.num_layers) * batch_ * capacity_ * 3 * C * dtype_size(activation_dtype_),
             device_);
  ids_ = Buffer((2 * static_cast<std::size_t>(batch_) + P) * sizeof(std::int32_t), device_);
  host_ids_.resize(2 * static_cast<std::size_t>(batch_));
  host_logits_.resize(static_cast<std::size_t>(batch_) * vocab_);
  host_top_logits_.resize(static_cast<std::size_t>(batch_) * kernels::kMaxDecodeTopK);
  host_top_ids_.resize(static_cast<std::size_t>(batch_) * kernels::kMaxDecodeTopK);
}

Tensor GptDecoder::weight(std::size_t param) const {
  const ParamSpec& spec = model_.params()[param];
  return model_.weights().slice(spec.offset, spec.numel);
}

Tensor GptDecoder::matrix(std::size_t param) const {
  if (matrices_.bytes() == 0) return weight(param);
  const ParamSpec& spec = model_.params()[param];
  // Filled in the constructor; the view type has no const flavour.
  return Tensor::flat(static_cast<char*>(const_cast<void*>(matrices_.data())) + spec.offset * dtype_size(matrix_dtype_),
                      matrix_dtype_, device_, spec.numel);
}

Tensor GptDecoder::activation(std::size_t offset, std::size_t numel) const {
  // Regions are carved from work_ in the constructor; the view type has no const flavour.
  return Tensor::flat(static_cast<char*>(const_cast<void*>(work_.data())) + offset, activation_dtype_, device_, numel);
}

Tensor GptDecoder::layer_cache(int layer) const {
  const std::size_t numel = static_cast<std::size_t>(batch_) * capacity_ * 3 * config_.hidden_size;
  // The cache is allocated in the constructor; the view type has no const flavour.
  return Tensor::flat(static_cast<char*>(const_cast<void*>(cache_.data())) +
                          static_cast<std::size_t>(layer) * numel * dtype_size(activation_dtype_),
                      activation_dtype_, device_, numel);
}

Tensor GptDecoder::cache_of(int layer, int row, int tokens) const {
  const std::size_t row_numel = static_cast<std::size_t>(capacity_) * 3 * config_.hidden_size;
  return layer_cache(layer).slice(static_cast<std::size_t>(row) * row_numel,
                                  static_cast<std::size_t>(tokens) * 3 * config_.hidden_size);
}

template <typename Attend>
void GptDecoder::run_layers(std::size_t rows, Attend&& attend) {
  const std::int64_t R = static_cast<std::int64_t>(rows), C = config_.hidden_size, F = config_.ffn_hidden_size;
  const std::size_t RC = rows * C, RF = rows * F;
  const Stream& stream = model_.stream();
  const DType statistic = model_.grad_dtype();
  const Tensor mean = Tensor::flat(static_cast<char*>(work_.data()) + mean_, statistic, device_, rows);
  const Tensor rstd = Tensor::flat(static_cast<char*>(work_.data()) + rstd_, statistic, device_, rows);
  const Tensor x = activation(x_, RC), ln = activation(ln_, RC), attention = activation(attention_, RC);
  const Tensor residual = activation(residual_, RC), fc_gelu = activation(fc_gelu_, RF);
  const double epsilon = config_.layernorm_epsilon;
  const kernels::DecodeLinearArgs add_residual{kernels::DecodeEpilogue::residual, config_.gelu()},
      with_gelu{kernels::DecodeEpilogue::gelu, config_.gelu()};
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerParamIndex& w = index_.layers[static_cast<std::size_t>(l)];
    kernels::layernorm_forward(x, weight(w.ln1_weight), weight(w.ln1_bias), epsilon, ln, mean, rstd, {R, C}, stream);
    attend(l, ln, attention);
    kernels::decode_linear(attention, matrix(w.proj_weight), weight(w.proj_bias), x, residual, {R, C, C}, add_residual,
                           model_.workspace(), stream);
    kernels::layernorm_forward(residual, weight(w.ln2_weight), weight(w.ln2_bias), epsilon, ln, mean, rstd, {R, C},
                               stream);
    kernels::decode_linear(ln, matrix(w.fc_weight), weight(w.fc_bias), Tensor{}, fc_gelu, {R, C, F}, with_gelu,
                           model_.workspace(), stream);
    kernels::decode_linear(fc_gelu, matrix(w.fc_proj_weight), weight(w.fc_proj_bias), residual, x, {R, F, C},
                           add_residual, model_.workspace(), stream);
  }
}

void GptDecoder::final_logits(const Tensor& x_rows, int first_row, int rows) {
  const std::int64_t R = rows, C = config_.hidden_size;
  const std::size_t count = static_cast<std::size_t>(rows);
  const Stream& stream = model_.stream();
  const DType statistic = model_.grad_dtype();
  const Tensor ln = activation(ln_, count * C);
  kernels::layernorm_forward(
      x_rows, weight(index_.final_ln_weight), weight(index_.final_ln_bias), config_.layernorm_epsilon, ln,
      Tensor::flat(static_cast<char*>(work_.data()) + mean_, statistic, device_, count),
      Tensor::flat(static_cast<char*>(work_.data()) + rstd_, statistic, device_, count), {R, C}, stream);
  const Tensor logits = Tensor::flat(
      static_cast<char*>(work_.data()) + logits_ + static_cast<std::size_t>(first_row) * vocab_ * dtype_size(statistic),
      statistic, device_, count * vocab_);
  kernels::decode_linear(ln, matrix(index_.word_embedding), Tensor{}, Tensor{}, logits, {R, C, vocab_}, {},
                         model_.workspace(), stream);
  host_logits_current_ = false;
}

void GptDecoder::prefill(int row, std::span<const std::int32_t> prompt) {
  const int n = static_cast<int>(prompt.size());
  ADAMANT_CHECK(row >= 0 && row < batch_, "decoding: sequence {} of a batch of {}", row, batch_);
  ADAMANT_CHECK(n >= 1 && n <= max_prompt_, "decoding: a prompt of {} tokens; the decoder takes 1..{}", n, max_prompt_);
  for (const std::int32_t id : prompt) {
    ADAMANT_CHECK(id >= 0 && id < config_.vocab_size, "decoding: token {} outside the vocabulary [0, {})", id,
                  config_.vocab_size);
  }
  const std::int64_t C = config_.hidden_size, H = config_.num_attention_heads, D = config_.head_dim();
  const Stream& stream = model_.stream();
  // The prompt ids sit after the step's tokens and positions, which a recorded step graph reads.
  auto* prompt_ids = static_cast<std::int32_t*>(ids_.data()) + 2 * batch_;
  // On the model's stream, so that the kernels below see the ids (a plain copy from pageable memory
  // may still be in flight when it returns, and the stream does not wait for it).
  comm::copy_bytes_on_stream(prompt_ids, prompt.data(), prompt.size_bytes(), stream);
  const Tensor ids = Tensor::flat(prompt_ids, DType::i32, device_, prompt.size());
  const Tensor x = activation(x_, static_cast<std::size_t>(n) * C);
  kernels::embedding_forward(ids, weight(index_.word_embedding), weight(index_.position_embedding), x,
                             {1, n, C, vocab_, 0}, stream);
  const Tensor logsumexp =
      Tensor::flat(static_cast<char*>(work_.data()) + logsumexp_, model_.grad_dtype(), device_, H * n);
  run_layers(static_cast<std::size_t>(n), [&](int layer, const Tensor& ln, const Tensor& attention) {
    const LayerParamIndex& w = index_.layers[static_cast<std::size_t>(layer)];
    const Tensor qkv = cache_of(layer, row, n);  // the projection lands in the cache itself
    kernels::decode_linear(ln, matrix(w.qkv_weight), weight(w.qkv_bias), Tensor{}, qkv, {n, C, 3 * C}, {},
                           model_.workspace(), stream);
    kernels::flash_attention_forward(qkv, attention, logsumexp, {1, n, H, D}, kernels::DropoutArgs{}, stream);
  });
  final_logits(x.slice(static_cast<std::size_t>(n - 1) * C, static_cast<std::size_t>(C)), row, 1);
  lengths_[static_cast<std::size_t>(row)] = n;
}

void GptDecoder::step_kernels() {
  const std::int64_t B = batch_, C = config_.hidden_size;
  const Stream& stream = model_.stream();
  auto* id_data = static_cast<std::int32_t*>(ids_.data());
  const Tensor tokens = Tensor::flat(id_data, DType::i32, device_, static_cast<std::size_t>(B));
  const Tensor positions = Tensor::flat(id_data + B, DType::i32, device_, static_cast<std::size_t>(B));
  const Tensor x = activation(x_, static_cast<std::size_t>(B * C));
  kernels::decode_embedding(tokens, positions, weight(index_.word_embedding), weight(index_.position_embedding), x, B,
                            C, stream);
  const Tensor qkv = activation(qkv_, static_cast<std::size_t>(B * 3 * C));
  const kernels::DecodeShape shape{B, capacity_, config_.num_attention_heads, config_.head_dim()};
  run_layers(static_cast<std::size_t>(B), [&](int layer, const Tensor& ln, const Tensor& attention) {
    const LayerParamIndex& w = index_.layers[static_cast<std::size_t>(layer)];
    kernels::decode_linear(ln, matrix(w.qkv_weight), weight(w.qkv_bias), Tensor{}, qkv, {B, C, 3 * C}, {},
                           model_.workspace(), stream);
    kernels::decode_attention(qkv, layer_cache(layer), positions, attention, shape, stream);
  });
  final_logits(x, 0, batch_);
}

void GptDecoder::step(std::span<const std::int32_t> tokens) {
  ADAMANT_CHECK(static_cast<int>(tokens.size()) == batch_, "decoding: {} tokens for a batch of {}", tokens.size(),
                batch_);
  for (int b = 0; b < batch_; ++b) {
    const std::int32_t id = tokens[static_cast<std::size_t>(b)];
    const int at = lengths_[static_cast<std::size_t>(b)];
    ADAMANT_CHECK(id >= 0 && id < config_.vocab_size, "decoding: token {} outside the vocabulary [0, {})", id,
                  config_.vocab_size);
    ADAMANT_CHECK(at >= 1 && at < capacity_,
                  "decoding: sequence {} holds {} tokens in a cache of {}; prefill it, or make the cache larger", b, at,
                  capacity_);
    host_ids_[static_cast<std::size_t>(b)] = id;
    host_ids_[static_cast<std::size_t>(batch_ + b)] = at;
  }
  comm::copy_bytes_on_stream(ids_.data(), host_ids_.data(), host_ids_.size() * sizeof(std::int32_t), model_.stream());
  step_graph_.run([this] { step_kernels(); });
  host_logits_current_ = false;
  for (int& length : lengths_) ++length;
}

std::span<const float> GptDecoder::logits(int row) {
  ADAMANT_CHECK(row >= 0 && row < batch_, "decoding: sequence {} of a batch of {}", row, batch_);
  if (!host_logits_current_) {
    model_.stream().synchronize();
    copy_bytes(host_logits_.data(), Device::cpu(), static_cast<const char*>(work_.data()) + logits_, device_,
               host_logits_.size() * sizeof(float));
    host_logits_current_ = true;
  }
  return std::span<const float>(host_logits_)
      .subspan(static_cast<std::size_t>(row) * vocab_, static_cast<std::size_t>(vocab_));
}

void GptDecoder::select_top(int k, int vocab, std::int32_t masked) {
  ADAMANT_CHECK(vocab >= 1 && vocab <= vocab_, "decoding: candidates among {} ids of a vocabulary of {}", vocab,
                vocab_);
  const std::size_t pairs = static_cast<std::size_t>(batch_) * static_cast<std::size_t>(k);
  const Stream& stream = model_.stream();
  char* work = static_cast<char*>(work_.data());
  kernels::decode_top_k(
      Tensor::flat(work + logits_, model_.grad_dtype(), device_, static_cast<std::size_t>(batch_) * vocab_),
      Tensor::flat(work + top_logits_, DType::f32, device_, pairs),
      Tensor::flat(work + top_ids_, DType::i32, device_, pairs), batch_, vocab_, vocab, k, masked, stream);
  comm::copy_bytes_on_stream(host_top_logits_.data(), work + top_logits_, pairs * sizeof(float), stream);
  comm::copy_bytes_on_stream(host_top_ids_.data(), work + top_ids_, pairs * sizeof(std::int32_t), stream);
  stream.synchronize();
  top_k_ = k;
}

GptDecoder::Candidates GptDecoder::candidates(int row) const {
  ADAMANT_CHECK(row >= 0 && row < batch_, "decoding: sequence {} of a batch of {}", row, batch_);
  ADAMANT_CHECK(top_k_ > 0, "decoding: candidates() before select_top()");
  const std::size_t first = static_cast<std::size_t>(row) * static_cast<std::size_t>(top_k_);
  return {std::span<const float>(host_top_logits_).subspan(first, static_cast<std::size_t>(top_k_)),
          std::span<const std::int32_t>(host_top_ids_).subspan(first, static_cast<std::size_t>(top_k_))};
}

}  // namespace adamant::model
