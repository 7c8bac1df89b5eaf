#include "adamant/model/gpt_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "adamant/comm/comm_stream.h"
#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/core/rng.h"
#include "adamant/kernels/cross_entropy.h"
#include "adamant/kernels/dispatch.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/gemm.h"
#include "adamant/model/model_memory.h"

namespace adamant::model {

namespace {

// Smaller loops stay on one thread: waking the team costs more than it saves.
constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 15;

// Philox stream of one parameter's initial values: a hash of its name (so a layer's
// weights do not depend on how many layers follow), top bit set to stay apart from
// the dropout streams.
std::uint64_t init_stream(std::string_view name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (const char c : name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash | (std::uint64_t{1} << 63);
}

// What the model's kernels keep between calls (kernels/workspace.h): the GEMMs' cuBLASLt
// state (with the recorded algorithms, if any), layernorm backward's column sums over up to a
// micro-batch of rows, and the attention backward's row statistics (on a GPU) and score scratch
// where the model takes one (ModelMemory::attention_statistics and attention_scores).
kernels::WorkspaceNeeds workspace_needs(const GptConfig& config, int micro_batch_size, std::size_t attention_statistics,
                                        std::size_t attention_scores,
                                        std::shared_ptr<const kernels::MatmulAlgorithmTable> matmul_algorithms) {
  kernels::WorkspaceNeeds needs;
  needs.matmul = true;
  needs.matmul_algorithms = std::move(matmul_algorithms);
  needs.layernorm_rows = static_cast<std::int64_t>(std::max(micro_batch_size, 0)) * config.seq_length;
  needs.layernorm_cols = config.hidden_size;
  needs.attention_statistics_bytes = attention_statistics;
  needs.attention_scores_bytes = attention_scores;
  needs.weight_grad_elements = config.largest_linear_weight();
  return needs;
}

bool is_layernorm(std::string_view name) { return name.find("layernorm") != std::string_view::npos; }

bool is_output_projection(std::string_view name) {
  return name.ends_with("self_attention.dense.weight") || name.ends_with("mlp.dense_4h_to_h.weight");
}

}  // namespace

GptModel::GptModel(const GptConfig& config, DType weight_dtype, int micro_batch_size, Device device, std::uint64_t seed,
                   std::size_t padded_numel, comm::Communicator* tensor_parallel, int pipeline_stage_index,
                   int passes_in_flight)
    : config_(config),
      tensor_parallel_(config.tensor_parallel_size > 1 ? tensor_parallel : nullptr),
      tp_rank_(tensor_parallel_ != nullptr ? tensor_parallel_->rank() : 0),
      stage_(pipeline_stage(config, pipeline_stage_index)),
      params_(build_stage_param_list(config, stage_)),
      dtypes_(model_dtypes(weight_dtype, device, config.classifier_logits, config.grad_buffer)),
      weight_dtype_(weight_dtype),
      grad_dtype_(dtypes_.grad),
      activation_dtype_(dtypes_.activations.activation),
      micro_batch_size_(micro_batch_size),
      device_(device),
      seed_(seed),
      buffer_numel_(std::max(params_.total_numel, padded_numel)),
      passes_in_flight_(passes_in_flight),
      own_stream_(device) {
  ADAMANT_CHECK(passes_in_flight >= 1, "GptModel: {} passes in flight; a stage holds at least one", passes_in_flight);
  for (const ModelChunk& chunk : stage_.chunks) chunks_.push_back({chunk, index_chunk_params(params_, chunk)});
  ADAMANT_CHECK(weight_dtype == DType::f32 || weight_dtype == DType::bf16 || weight_dtype == DType::f16 ||
                    weight_dtype == DType::f64,
                "GptModel: weights of {}; use fp32, bf16, fp16 (or fp64 for reference checks)",
                dtype_name(weight_dtype));
  ADAMANT_CHECK(micro_batch_size >= 1, "model.micro_batch_size is {}; use 1 or more", micro_batch_size);
  // The kernels take their own weight dtype, or on the CPU an fp32 working copy of 16-bit weights.
  const DType compute_weight_dtype = dtypes_.compute_weight;
  ADAMANT_CHECK(weight_dtype == compute_weight_dtype ||
                    (compute_weight_dtype == DType::f32 && (weight_dtype == DType::bf16 || weight_dtype == DType::f16)),
                "GptModel on {} with {} weights: the GPU path computes with bf16 weights and activations; set "
                "model.megatron_amp_O2=true and trainer.precision=bf16 (or trainer.accelerator=cpu)",
                device.str(), dtype_name(weight_dtype));
  if (config.tensor_parallel_size > 1) {
    ADAMANT_CHECK(tensor_parallel_ != nullptr && tensor_parallel_->size() == config.tensor_parallel_size,
                  "GptModel: model.tensor_model_parallel_size is {} but the tensor-parallel group has {} rank(s); "
                  "build the model with the process grid's tensor-parallel communicator",
                  config.tensor_parallel_size, tensor_parallel != nullptr ? tensor_parallel->size() : 0);
    ADAMANT_CHECK(tensor_parallel_->device() == device,
                  "GptModel on {}: its tensor-parallel communicator moves buffers on {}", device.str(),
                  tensor_parallel_->device().str());
  }
  for (const ParamSpec& spec : params_.params) {
    grad_reduced_over_tp_.push_back(config.sequence_parallel && is_layernorm(spec.name));
  }
  const ModelMemory memory =
      model_memory(config_, weight_dtype_, micro_batch_size_, device_, padded_numel, stage_, passes_in_flight_);
  layout_ = ActivationLayout::plan(config_, micro_batch_size_, dtypes_.activations, stage_.chunks.front().num_layers);
  attention_statistics_ = memory.attention_statistics;
  attention_scores_ = memory.attention_scores;
  remake_workspace();  // made once its attention scratch is known
  weights_ = Buffer(memory.weights, device_);
  if (memory.working_weights > 0) working_weights_ = Buffer(memory.working_weights, device_);
  grads_ = Buffer(memory.grads, device_);
  // The linear layers' weight gradients (most of the elements) are accumulated into grads_ by
  // their GEMMs; the other parameters get a place in the per-micro-batch scratch.
  micro_offsets_ = micro_grad_layout(params_, stage_).offsets;
  micro_grads_ = Buffer(memory.micro_grads, device_);
  activations_ = Buffer(memory.activations, device_);
  device_tokens_ = Buffer(memory.tokens, device_);
  device_targets_ = Buffer(memory.targets, device_);
  pass_samples_ = Buffer(memory.pass_samples, device_);
  grads_finished_.resize(chunks_.size());
  weights_needed_.resize(chunks_.size());
  grads_discarded_.assign(chunks_.size(), 1);
  host_statistics_ = Buffer(memory.host_statistics, Device::cpu());
  loss_reads_ = LossReadback(static_cast<std::size_t>(micro_batch_size_) * config_.seq_length, grad_dtype_, device_);
  init_weights();
}

void GptModel::set_stream(const Stream& compute_stream) {
  ADAMANT_CHECK(compute_stream.device() == device_, "GptModel on {}: its compute stream is on {}; pass a stream of {}",
                device_.str(), compute_stream.device().str(), device_.str());
  stream_->synchronize();  // work already issued on the old stream is done before the new one takes over
  stream_ = &compute_stream;
  remake_workspace();
}

void GptModel::set_matmul_algorithms(std::shared_ptr<const kernels::MatmulAlgorithmTable> algorithms) {
  stream_->synchronize();  // no product of the old plans is still running
  matmul_algorithms_ = std::move(algorithms);
  remake_workspace();
}

void GptModel::remake_workspace() {
  // The old workspace goes before the new one is made, so that set-up never holds both.
  { const kernels::Workspace released = std::move(workspace_); }
  workspace_ = kernels::Workspace(*stream_, workspace_needs(config_, micro_batch_size_, attention_statistics_,
                                                            attention_scores_, matmul_algorithms_));
  pass_graphs_ = make_pass_graphs();  // recordings hold the old stream and workspace
}

PassGraphs GptModel::make_pass_graphs() const {
  // Tensor parallelism runs collectives inside the passes, whose communicators keep host-side
  // state per call (the collective watchdog): those passes run directly.
  if (!config_.cuda_graph || tensor_parallel_ != nullptr) return {};
  return PassGraphs(*stream_, static_cast<int>(stage_.chunks.size()), passes_in_flight_);
}

void GptModel::run_pass(const Pass& pass, PassKind kind, float loss_scale, const StepGraph::Work& work,
                        const StepGraph::OnPause& on_pause) {
  if (!pass.training) {  // validation: rare, and of any micro-batch size
    StepGraph::run_directly(work, on_pause);
    return;
  }
  pass_graphs_.run(chunk_index(pass), pass.slot, kind, {pass.batch, loss_scale}, work, on_pause);
}

Tensor GptModel::weights() { return Tensor::flat(weights_.data(), weight_dtype_, device_, buffer_numel_); }

Tensor GptModel::grads() { return Tensor::flat(grads_.data(), dtypes_.grad_buffer, device_, buffer_numel_); }

void GptModel::zero_grads() { zero(grads()); }

void GptModel::discard_grads() { std::fill(grads_discarded_.begin(), grads_discarded_.end(), 1); }

void GptModel::zero(Tensor t) { kernels::fill_zero(t, *stream_); }

void GptModel::init_weights() {
  // Filled in a host copy and copied to the model's device once (init is not part of a step).
  Buffer staging(weights_.bytes(), Device::cpu());
  void* host_weights = staging.data();
  const double base_std = config_.init_method_std;
  const double output_std = base_std / std::sqrt(2.0 * config_.num_layers);
  for (const ParamSpec& spec : params_.params) {
    const bool layernorm = is_layernorm(spec.name);
    const bool is_bias = spec.name.ends_with(".bias");
    const bool random = !layernorm && !is_bias;
    const double constant = (layernorm && !is_bias) ? 1.0 : 0.0;
    const double std = is_output_projection(spec.name) ? output_std : base_std;
    const std::uint64_t stream = init_stream(spec.name);
    const auto numel = static_cast<std::int64_t>(spec.numel);
    char* base = static_cast<char*>(host_weights) + spec.offset * dtype_size(weight_dtype_);
    const TensorParallelSlice slice = tensor_parallel_slice(config_, spec);
    const bool whole = tp_size() == 1 || slice.split == TensorParallelSplit::replicated;
    // Element g of the whole parameter is std * normal_at(seed, g, stream): one Philox draw gives
    // the normal pair of elements 2p and 2p + 1. A whole parameter walks pairs and draws each once;
    // a tensor-parallel slice draws for each of its elements by its index in the whole parameter.
    auto fill = [&](auto* out, auto convert) {
      if (!random) {
        for (std::int64_t i = 0; i < numel; ++i) out[i] = convert(constant);
        return;
      }
      if (!whole) {
#pragma omp parallel for schedule(static) if (numel >= kParallelMinElements)
        for (std::int64_t i = 0; i < numel; ++i) {
          const std::size_t g = slice.global_index(static_cast<std::size_t>(i), tp_rank_, tp_size());
          out[i] = convert(std * normal_pair(philox_draw(seed_, g / 2, stream))[g % 2]);
        }
        return;
      }
      const std::int64_t pairs = (numel + 1) / 2;
#pragma omp parallel for schedule(static) if (numel >= kParallelMinElements)
      for (std::int64_t p = 0; p < pairs; ++p) {
        const auto pair = normal_pair(philox_draw(seed_, static_cast<std::uint64_t>(p), stream));
        out[2 * p] = convert(std * pair[0]);
        if (2 * p + 1 < numel) out[2 * p + 1] = convert(std * pair[1]);
      }
    };
    switch (weight_dtype_) {
      case DType::f64:
        fill(reinterpret_cast<double*>(base), [](double x) { return x; });
        break;
      case DType::f32:
        fill(reinterpret_cast<float*>(base), [](double x) { return static_cast<float>(x); });
        break;
      default: {  // 16-bit: round the fp32 value to nearest even, as a cast of fp32 weights would
        const bool bf16 = weight_dtype_ == DType::bf16;
        fill(reinterpret_cast<std::uint16_t*>(base), [bf16](double x) {
          const auto f = static_cast<float>(x);
          return bf16 ? f32_to_bf16(f) : f32_to_f16(f);
        });
        break;
      }
    }
  }
  stream_->synchronize();  // no kernel of an earlier pass still reads the weights
  copy_bytes(weights_.data(), device_, host_weights, Device::cpu(), weights_.bytes());
}

void GptModel::refresh_working_weights() {
  if (working_weights_.empty()) return;
  kernels::cast(weights().slice(0, params_.total_numel),
                Tensor::flat(working_weights_.data(), grad_dtype_, device_, params_.total_numel), *stream_);
}

Tensor GptModel::act(const Region& region, std::size_t count) {
  ADAMANT_CHECK(count <= region.numel, "GptModel: activation view of {} elements in a region of {}", count,
                region.numel);
  const std::size_t base =
      region.saved ? saved_base_ : static_cast<std::size_t>(passes_in_flight_) * layout_.saved_bytes;
  return Tensor::flat(static_cast<char*>(activations_.data()) + base + region.offset, region.dtype, device_, count);
}

Tensor GptModel::weight(std::size_t param) {
  const ParamSpec& spec = params_[param];
  if (working_weights_.empty()) {  // weights of the kernels' own dtype: used as they are
    return Tensor::flat(static_cast<char*>(weights_.data()) + spec.offset * dtype_size(weight_dtype_), weight_dtype_,
                        device_, spec.numel);
  }
  return Tensor::flat(static_cast<char*>(working_weights_.data()) + spec.offset * dtype_size(grad_dtype_), grad_dtype_,
                      device_, spec.numel);
}

bool GptModel::grad_in_place(const Pass& pass, std::size_t param) const {
  if (micro_offsets_[param] == kAccumulatedInPlace) return true;
  // A writing pass needs no scratch to add from; the kernels get the alignment the scratch gives them.
  // Their sums are fp32 (a bf16 buffer gets them rounded in finish_grad).
  if (dtypes_.grad_buffer != grad_dtype_) return false;
  const std::size_t byte_offset = params_[param].offset * dtype_size(grad_dtype_);
  return pass.writes_grads && byte_offset % (MicroGradLayout::kAlignment * dtype_size(grad_dtype_)) == 0;
}

Tensor GptModel::micro_grad(const Pass& pass, std::size_t param) {
  const ParamSpec& spec = params_[param];
  if (grad_in_place(pass, param)) return grads().slice(spec.offset, spec.numel);
  return Tensor::flat(static_cast<char*>(micro_grads_.data()) + micro_offsets_[param] * dtype_size(grad_dtype_),
                      grad_dtype_, device_, spec.numel);
}

void GptModel::finish_grad(const Pass& pass, std::size_t param, const GradReadyFn& on_grad_ready) {
  const ParamSpec& spec = params_[param];
  const Tensor grad = micro_grad(pass, param);
  if (grad_reduced_over_tp_[param]) tp_all_reduce(grad);  // each rank saw only its rows
  const Tensor in_grads = grads().slice(spec.offset, spec.numel);
  if (grad.data != in_grads.data) {  // made in the micro-batch scratch: into the buffer now
    if (pass.writes_grads) {
      copy(grad, in_grads);
    } else {
      kernels::accumulate(grad, in_grads, *stream_);
    }
  }
  if (on_grad_ready) on_grad_ready(param);  // final in stream order: the optimizer orders its collective after it
}

kernels::DropoutArgs GptModel::dropout_at(const Pass& pass, float probability, std::uint32_t site,
                                          std::uint64_t first_element) const {
  kernels::DropoutArgs args;
  args.probability = pass.training ? probability : 0.0f;
  args.seed = seed_;
  args.sample_offset = static_cast<const std::uint64_t*>(pass_samples_.data()) + pass.slot;  // begin_pass wrote it
  args.site = site;
  args.first_element = first_element;
  return args;
}

std::size_t GptModel::local_rows(const Pass& pass) const {
  const auto tokens = static_cast<std::size_t>(pass.batch) * static_cast<std::size_t>(pass.seq);
  return config_.sequence_parallel ? tokens / static_cast<std::size_t>(tp_size()) : tokens;
}

std::size_t GptModel::first_row(const Pass& pass) const {
  return config_.sequence_parallel ? static_cast<std::size_t>(tp_rank_) * local_rows(pass) : 0;
}

void GptModel::tp_all_reduce(Tensor data) {
  tensor_parallel_->order_after(*stream_);
  tensor_parallel_->all_reduce_async(data, comm::ReduceOp::sum).wait(*stream_);
}

void GptModel::tp_all_gather(const Tensor& mine, Tensor all) {
  tensor_parallel_->order_after(*stream_);
  tensor_parallel_->all_gather_async(mine, all).wait(*stream_);
}

Tensor GptModel::row_parallel_bias(std::size_t param) { return tp_rank_ == 0 ? weight(param) : Tensor{}; }

void GptModel::check_batch(const MicroBatch& batch, const char* what) const {
  ADAMANT_CHECK(batch.batch_size >= 1 && batch.batch_size <= micro_batch_size_,
                "{}: micro-batch of {} samples; the model was built for 1..{} (model.micro_batch_size)", what,
                batch.batch_size, micro_batch_size_);
  const std::size_t expected = static_cast<std::size_t>(batch.batch_size) * config_.seq_length;
  ADAMANT_CHECK(batch.tokens.size() == expected && batch.targets.size() == expected,
                "{}: {} tokens and {} targets for {} samples of model.encoder_seq_length {} (expected {} each)", what,
                batch.tokens.size(), batch.targets.size(), batch.batch_size, config_.seq_length, expected);
  for (std::size_t i = 0; i < expected; ++i) {
    ADAMANT_CHECK(batch.tokens[i] >= 0 && batch.tokens[i] < config_.vocab_size && batch.targets[i] >= 0 &&
                      batch.targets[i] < config_.vocab_size,
                  "{}: token {} / target {} at position {} is outside the tokenizer's vocabulary [0, {})", what,
                  batch.tokens[i], batch.targets[i], i, config_.vocab_size);
  }
}

Tensor GptModel::stage_ids(std::span<const std::int32_t> ids, Buffer& device_ids, std::size_t at) {
  ADAMANT_CHECK((at + ids.size()) * sizeof(std::int32_t) <= device_ids.bytes(),
                "GptModel: {} token ids for a device buffer of {}", at + ids.size(),
                device_ids.bytes() / sizeof(std::int32_t));
  std::int32_t* dst = static_cast<std::int32_t*>(device_ids.data()) + at;
  comm::copy_bytes_on_stream(dst, ids.data(), ids.size_bytes(), *stream_);
  return Tensor::flat(dst, DType::i32, device_, ids.size());
}

Tensor GptModel::slot_tokens(int slot, std::size_t count) {
  const std::size_t at = static_cast<std::size_t>(slot) * micro_batch_size_ * config_.seq_length;
  return Tensor::flat(static_cast<std::int32_t*>(device_tokens_.data()) + at, DType::i32, device_, count);
}

void GptModel::queue_loss_read(const Pass& pass) {
  loss_reads_.queue(act(layout_.losses, static_cast<std::size_t>(pass.batch) * pass.seq), *stream_);
}

void GptModel::check_losses_taken(const char* what) const {
  ADAMANT_CHECK(loss_reads_.untaken() == 0,
                "{}: the losses of {} training pass(es) have not been taken; call take_loss_sum first", what,
                loss_reads_.untaken());
}

std::size_t GptModel::tied_embedding() const {
  if (stage_.stages == 1) return kAbsentParam;
  for (const Chunk& chunk : chunks_) {
    if (chunk.index.word_embedding != kAbsentParam) return chunk.index.word_embedding;
  }
  return kAbsentParam;
}

const GptParamIndex& GptModel::whole_model_index(const char* what) const {
  ADAMANT_CHECK(
      chunks_.size() == 1 && chunks_[0].layers.has_embedding && chunks_[0].layers.has_head,
      "{}: this model is pipeline stage {} of {}; it needs the whole model (model.pipeline_model_parallel_size "
      "1): run the passes of a pipeline schedule instead",
      what, stage_.stage, stage_.stages);
  return chunks_[0].index;
}

GptModel::Pass GptModel::begin_pass(int chunk, int slot, const MicroBatch& batch, bool training, const char* what) {
  ADAMANT_CHECK(chunk >= 0 && chunk < static_cast<int>(chunks_.size()), "{}: chunk {}; this stage holds {} chunk(s)",
                what, chunk, chunks_.size());
  const Chunk& c = chunks_[static_cast<std::size_t>(chunk)];
  if (c.layers.has_embedding || c.layers.has_head) {
    check_batch(batch, what);
  } else {
    ADAMANT_CHECK(batch.batch_size >= 1 && batch.batch_size <= micro_batch_size_,
                  "{}: micro-batch of {} samples; the model was built for 1..{} (model.micro_batch_size)", what,
                  batch.batch_size, micro_batch_size_);
  }
  select_slot(slot, what);
  kernels::check_dropout_samples(batch.first_sample_index, batch.batch_size, what);
  comm::copy_bytes_on_stream(static_cast<std::uint64_t*>(pass_samples_.data()) + slot, &batch.first_sample_index,
                             sizeof(std::uint64_t), *stream_);
  const std::size_t tokens = static_cast<std::size_t>(batch.batch_size) * config_.seq_length;
  return {batch.batch_size,
          config_.seq_length,
          c.layers.has_embedding ? slot_tokens(slot, tokens) : Tensor{},
          training,
          &c,
          slot};
}

void GptModel::forward_pass(int chunk, int slot, const MicroBatch& batch, bool training,
                            const WeightNeeds& on_weight_needed) {
  const Pass pass = begin_pass(chunk, slot, batch, training, "forward_pass");
  if (pass.chunk->layers.has_embedding) {
    stage_ids(batch.tokens, device_tokens_, static_cast<std::size_t>(slot) * micro_batch_size_ * config_.seq_length);
  }
  if (!working_weights_.empty() && on_weight_needed) {
    // The working copy is cast from every weight at once, before the forward reads any.
    for (std::size_t param = 0; param < params_.size(); ++param) on_weight_needed.wait(param);
  }
  refresh_working_weights();
  if (!on_weight_needed || !working_weights_.empty()) {
    run_pass(pass, PassKind::forward, 0.0f, [&](const StepGraph::Pause&) { forward(pass, {}); });
    return;
  }
  // Each wait is a pause of the pass, as a finished gradient is of the backward: a replay waits
  // between its graphs, where the run that issued the kernels did. A weight found in place (its
  // bucket waited for already, or never in flight) makes no pause: a pause costs a graph.
  std::vector<std::size_t>& needed = weights_needed_[static_cast<std::size_t>(chunk_index(pass))];
  run_pass(
      pass, PassKind::forward, 0.0f,
      [&](const StepGraph::Pause& pause) {
        needed.clear();
        forward(pass, [&](std::size_t param) {
          if (!on_weight_needed.waits_for(param)) return;
          needed.push_back(param);
          pause();
        });
      },
      [&](int k) { on_weight_needed.wait(needed[static_cast<std::size_t>(k)]); });
}

void GptModel::backward_pass(int chunk, int slot, const MicroBatch& batch, float loss_scale,
                             const GradReadyFn& on_grad_ready) {
  Pass pass = begin_pass(chunk, slot, batch, true, "backward_pass");
  std::uint8_t& discarded = grads_discarded_[static_cast<std::size_t>(chunk)];
  pass.writes_grads = discarded != 0;
  discarded = 0;
  const bool head = pass.chunk->layers.has_head;
  const Tensor targets = head ? stage_ids(batch.targets, device_targets_) : Tensor{};
  // Each finished gradient is a pause of the pass (core/step_graph.h), so that a replay, which
  // runs no host code inside its graphs, reports it between them: in the order the last run
  // that issued the kernels finished them.
  std::vector<std::size_t>& reported = grads_finished_[static_cast<std::size_t>(chunk_index(pass))];
  const GradReadyFn no_reports;
  run_pass(
      pass, pass.writes_grads ? PassKind::backward_writing : PassKind::backward_adding, loss_scale,
      [&](const StepGraph::Pause& pause) {
        if (head) classifier(pass, targets, loss_scale / (static_cast<double>(pass.batch) * pass.seq), true);
        if (!on_grad_ready) {
          backward(pass, no_reports);
          return;
        }
        reported.clear();
        backward(pass, [&](std::size_t param) {
          reported.push_back(param);
          pause();
        });
      },
      !on_grad_ready ? StepGraph::OnPause{} : [&](int k) { on_grad_ready(reported[static_cast<std::size_t>(k)]); });
  if (head) queue_loss_read(pass);
}

double GptModel::evaluate_loss(int chunk, int slot, const MicroBatch& batch) {
  const Pass pass = begin_pass(chunk, slot, batch, false, "evaluate_loss");
  ADAMANT_CHECK(pass.chunk->layers.has_head, "evaluate_loss: chunk {} of pipeline stage {} has no classifier", chunk,
                stage_.stage);
  check_losses_taken("evaluate_loss");
  classifier(pass, stage_ids(batch.targets, device_targets_), 0.0, false);
  queue_loss_read(pass);
  return loss_reads_.take_sum_of_means();
}

Tensor GptModel::stream_rows(const Region& region, int batch_size) {
  Pass rows;
  rows.batch = batch_size;
  rows.seq = config_.seq_length;
  return act(region, local_rows(rows) * static_cast<std::size_t>(config_.hidden_size));
}

void GptModel::select_slot(int slot, const char* what) {
  ADAMANT_CHECK(slot >= 0 && slot < passes_in_flight_, "{}: slot {}; this stage holds {} pass(es) in flight", what,
                slot, passes_in_flight_);
  saved_base_ = static_cast<std::size_t>(slot) * layout_.saved_bytes;
}

Tensor GptModel::pass_input(int slot, int batch_size) {
  select_slot(slot, "pass_input");
  return stream_rows(layout_.embedded, batch_size);
}

Tensor GptModel::pass_output(int slot, int batch_size) {
  select_slot(slot, "pass_output");
  return stream_rows(layout_.layers.back().residual_mlp, batch_size);
}

Tensor GptModel::output_grad(int batch_size) { return stream_rows(layout_.d_residual, batch_size); }

Tensor GptModel::input_grad(int slot, int batch_size) { return pass_input(slot, batch_size); }

void GptModel::copy(const Tensor& src, Tensor dst) {
  if (src.dtype == DType::f64) {  // reference checks on the CPU; cast covers the training dtypes
    copy_bytes(dst.data, device_, src.data, device_, src.bytes());
    return;
  }
  kernels::cast(src, dst, *stream_);
}

double GptModel::forward_backward(const MicroBatch& batch, float loss_scale, const GradReadyFn& on_grad_ready) {
  whole_model_index("forward_backward");
  check_losses_taken("forward_backward");
  forward_pass(0, 0, batch, true);
  backward_pass(0, 0, batch, loss_scale, on_grad_ready);
  return loss_reads_.take_sum_of_means();
}

double GptModel::forward_loss(const MicroBatch& batch) {
  whole_model_index("forward_loss");
  forward_pass(0, 0, batch, false);
  return evaluate_loss(0, 0, batch);
}

void GptModel::next_token_logits(std::span<const std::int32_t> tokens, std::span<float> logits) {
  const int count = static_cast<int>(tokens.size());
  ADAMANT_CHECK(count >= 1 && count <= config_.seq_length,
                "next_token_logits: {} tokens; give 1..{} (model.encoder_seq_length)", tokens.size(),
                config_.seq_length);
  ADAMANT_CHECK(tp_size() == 1,
                "next_token_logits: the model is split over {} tensor-parallel ranks; sample from a model built with "
                "model.tensor_model_parallel_size=1",
                tp_size());
  const int vocab = config_.padded_vocab_size();
  ADAMANT_CHECK(static_cast<int>(logits.size()) == vocab, "next_token_logits: room for {} logits, need {}",
                logits.size(), vocab);
  for (const std::int32_t id : tokens) {
    ADAMANT_CHECK(id >= 0 && id < config_.vocab_size, "next_token_logits: token {} outside the vocabulary [0, {})", id,
                  config_.vocab_size);
  }
  const GptParamIndex& index = whole_model_index("next_token_logits");
  refresh_working_weights();
  saved_base_ = 0;
  const Pass pass{1, count, stage_ids(tokens, device_tokens_), false, &chunks_[0], 0};
  forward(pass, {});
  const std::size_t hidden = static_cast<std::size_t>(config_.hidden_size);
  const Tensor last = act(layout_.final_ln, count * hidden).slice((count - 1) * hidden, hidden);
  // One row in the statistic dtype (fp32 on a GPU) over the logits chunk's bytes, planned to hold it.
  const Tensor chunk = act(layout_.logits_chunk, layout_.logits_chunk.numel);
  ADAMANT_CHECK(chunk.bytes() >= static_cast<std::size_t>(vocab) * dtype_size(grad_dtype_),
                "next_token_logits: the logits chunk holds {} bytes, less than a row", chunk.bytes());
  Tensor out = Tensor::flat(chunk.data, grad_dtype_, device_, static_cast<std::size_t>(vocab));
  kernels::gemm(kernels::Transpose::no, kernels::Transpose::yes, 1, vocab, config_.hidden_size, 1.0, last,
                weight(index.word_embedding), 0.0, out, workspace_, *stream_);
  stream_->synchronize();
  copy_bytes(host_statistics_.data(), Device::cpu(), out.data, device_, out.bytes());
  for (int v = 0; v < vocab; ++v) {
    logits[v] = grad_dtype_ == DType::f64 ? static_cast<float>(static_cast<const double*>(host_statistics_.data())[v])
                                          : static_cast<const float*>(host_statistics_.data())[v];
  }
}

}  // namespace adamant::model
