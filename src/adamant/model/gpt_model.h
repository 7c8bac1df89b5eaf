#pragma once
// The GPT-3 decoder (pre-LN, learned positions, tied word embeddings, exact or tanh GELU)
// with explicit layer-by-layer forward and backward; no autograd.
//
// Memory: weights, gradients, a small per-micro-batch gradient scratch and all
// activations each live in one flat Buffer allocated in the constructor;
// forward_backward never allocates.
//
// Precision on the CPU: weights may be bf16/fp16 (megatron_amp_O2 model weights),
// fp32, or fp64 (reference checks). bf16/fp16 weights are converted into a
// preallocated fp32 working copy once per forward; activations and gradients are
// computed in fp32 (fp64 when the weights are fp64).
// On a CUDA device (O2): bf16 weights used as they are, bf16 activations, fp32
// layernorm statistics and losses, fp32 or bf16 logits (model.classifier_logits_dtype),
// fp32 gradients (the GPU dtype convention of kernels/dispatch.h). Every kernel runs on the compute stream;
// tokens and targets are copied once per micro-batch into preallocated device
// buffers in stream order, and the per-token losses come back in one small copy per call,
// which is the only host synchronisation (the loss is returned).
// The linear layers' weight gradients (about 92% of the elements of GPT-3 1.3B) are
// accumulated into grads() by their weight-gradient GEMMs (beta = 1, as Megatron's
// gradient-accumulation fusion), with no scratch and no extra pass; the other
// parameters' (biases, layernorms) are formed in a small per-micro-batch scratch and then
// added. A step's first backward of each chunk (after discard_grads) writes instead of
// adding: the GEMMs with beta = 0 and the other kernels straight into grads(), so that no
// pass zeroes the buffer and no GEMM reads it.
//
// Dropout masks are counter-based (Philox): a function of (seed, global sample
// index, site, element) only, independent of how samples are grouped. The kernels read
// each pass's first sample index from device memory (one value per activation slot), so
// that the same launches serve every micro-batch.
//
// Recorded passes (config.cuda_graph, model.enable_cuda_graph; pass_graphs.h): each training
// pass of a chunk in a slot runs as CUDA graphs from its third run on: one, or with
// on_grad_ready one per stretch of kernels between finished gradients, each reported between
// the graphs as a direct run reports it. Its kernels are the same, so are its results, bit
// for bit.
//
// Tensor parallelism (Megatron's scheme, config.tensor_parallel_size ranks): each rank
// holds its heads of the attention, its columns of the MLP and its rows of the padded
// vocabulary (param_layout.h); the row-parallel GEMMs' partial sums are all-reduced over the
// group, the cross-entropy combines every rank's per-row statistics. With sequence
// parallelism the residual stream, layernorms and hidden dropout work on 1/tp of the rows:
// all-gathers before the column-parallel GEMMs and reduce-scatters after the row-parallel
// ones replace the all-reduces, and the layernorms' gradients are all-reduced over the
// group. The weights of any tensor-parallel size are slices of the same whole model (init
// draws by whole-parameter index), and the hidden dropout masks are the whole model's; the
// attention dropout of a rank's heads draws from a site of its own.
//
// Pipeline parallelism (config.pipeline_parallel_size stages, pipeline_stage.h): a model holds one
// stage's chunks of layers and runs one chunk's forward or backward pass at a time for a schedule
// (train/pipeline_runner.h). The activations backward reads are kept per micro-batch in flight
// (one slot each, activations.h), the scratch is shared. Dropout sites and init streams follow the
// whole model's layer numbers and parameter names, so the stages compute what the whole model does.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/core/buffer.h"
#include "adamant/core/param_spec.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/dropout.h"
#include "adamant/kernels/workspace.h"
#include "adamant/model/activations.h"
#include "adamant/model/gpt_config.h"
#include "adamant/model/loss_readback.h"
#include "adamant/model/model_memory.h"
#include "adamant/model/param_layout.h"
#include "adamant/model/pass_graphs.h"
#include "adamant/model/pipeline_stage.h"

namespace adamant::model {

struct MicroBatch {
  std::span<const std::int32_t> tokens;   // [batch_size, seq_length], ids in [0, vocab_size)
  std::span<const std::int32_t> targets;  // same shape: the next token of each position
  int batch_size = 0;
  std::uint64_t first_sample_index = 0;  // global index of the first sample (dropout masks)
};

using GradReadyFn = std::function<void(std::size_t param_index)>;
// A forward's waits for weights that may still be in flight (the optimizer's overlap_param_sync):
// `wait(param)` runs on the host right before the first kernel that reads parameter param's weights,
// in stream order (what it enqueues on the model's stream comes before that kernel), for each
// parameter that `pending(param)` says may still be in flight (unset: every parameter). A recorded
// forward ends a graph at each such wait, so that asking only where a wait is due keeps the graphs few.
struct WeightNeeds {
  std::function<void(std::size_t param_index)> wait;
  std::function<bool(std::size_t param_index)> pending;

  explicit operator bool() const { return static_cast<bool>(wait); }
  bool waits_for(std::size_t param_index) const { return !pending || pending(param_index); }
};

class GptModel {
 public:
  // On the CPU, or on a CUDA device with bf16 weights. padded_numel: the flat weight and
  // gradient buffers hold at least this many elements (the optimizer's shard padding after
  // the last parameter; it stays zero). The model starts on a stream of its own; see set_stream.
  // tensor_parallel: the group of config.tensor_parallel_size ranks (buffers on `device`) when
  // that size is above 1, else null; it must outlive the model.
  // pipeline_stage: which stage of config.pipeline_parallel_size this model holds (pipeline_stage.h);
  // passes_in_flight: how many micro-batches' activations it keeps at once (the schedule's peak).
  GptModel(const GptConfig& config, DType weight_dtype, int micro_batch_size, Device device, std::uint64_t seed,
           std::size_t padded_numel = 0, comm::Communicator* tensor_parallel = nullptr, int pipeline_stage = 0,
           int passes_in_flight = 1);
  GptModel(const GptModel&) = delete;  // holds a pointer to its own stream
  GptModel& operator=(const GptModel&) = delete;

  // Runs every later kernel on `compute_stream` (the optimizer's, so that gradients and
  // weight updates are ordered without host waits). It must be on the model's device and
  // outlive the model.
  void set_stream(const Stream& compute_stream);
  const Stream& stream() const { return *stream_; }
  // What the kernels on stream() keep between calls (cuBLASLt, layernorm's column sums), made
  // with the model and again by set_stream: no step allocates. For callers that run the
  // model's kernels on its stream (the decoder).
  kernels::Workspace& workspace() { return workspace_; }
  // The GEMMs use the algorithms recorded for them in `algorithms` (kernels/matmul_algorithms.h;
  // null: cuBLASLt's heuristics choose). Remakes the workspace: call before the first step.
  void set_matmul_algorithms(std::shared_ptr<const kernels::MatmulAlgorithmTable> algorithms);
  Device device() const { return device_; }
  // Whether its training passes are recorded (config.cuda_graph without tensor parallelism; the
  // CPU's recordings run each pass directly).
  bool records_passes() const { return pass_graphs_.enabled(); }
  // How many of its passes run as recorded CUDA graphs now (config.cuda_graph; 0 on the CPU).
  int recorded_passes() const { return pass_graphs_.recorded(); }
  // How many graphs a replay of all of them launches (a backward reporting its gradients has several).
  int recorded_graphs() const { return pass_graphs_.graphs(); }

  const GptConfig& config() const { return config_; }
  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return config_.tensor_parallel_size; }
  const PipelineStage& stage() const { return stage_; }
  int passes_in_flight() const { return passes_in_flight_; }
  const ParamList& params() const { return params_; }  // this stage's (build_stage_param_list)
  // This stage's word embedding when another stage holds it too (the first and the last of two or
  // more stages: its gradient is summed over them), else kAbsentParam.
  std::size_t tied_embedding() const;
  int micro_batch_size() const { return micro_batch_size_; }
  DType weight_dtype() const { return weight_dtype_; }
  DType grad_dtype() const { return grad_dtype_; }
  DType grad_buffer_dtype() const {
    return dtypes_.grad_buffer;
  }  // grads(): grad_dtype(), or bf16 (GptConfig::grad_buffer)
  DType activation_dtype() const { return activation_dtype_; }

  Tensor weights();  // flat, weight_dtype, every parameter at its ParamSpec::offset (buffer_numel() elements)
  Tensor grads();    // flat, grad_buffer_dtype(), same offsets, accumulated over micro-batches
  std::size_t buffer_numel() const { return buffer_numel_; }

  // normal(0, init_method_std) weights, output projections std / sqrt(2 * num_layers), biases 0,
  // layernorm weight 1 / bias 0; a function of (seed, config) only. Called by the constructor.
  void init_weights();
  // Zeroes grads() (one pass over the buffer); later backwards add to the zeros.
  void zero_grads();
  // Drops the gradients held without touching the buffer: each chunk's next backward writes
  // its parameters' gradients instead of adding to them, and the ones after add. What a
  // training step starts with (train/pipeline_runner.h); grads() holds stale values until then.
  // A new model starts so.
  void discard_grads();

  // Forward and backward of one micro-batch through the whole model (one pipeline stage;
  // batch_size <= micro_batch_size, seq_length tokens each, dropout on). Returns the mean cross-entropy over its tokens
  // and adds d(loss_scale * mean loss)/dw into grads() (writes it instead, the first backward after discard_grads();
  // a training loop calls that at each step's start, since the optimizer leaves the last step's gradients in
  // grads()). on_grad_ready, when set, is called once per parameter as soon
  // as its gradient is final in grads(), in the flat layout's order (final layernorm first, the tied word embedding
  // last); with recorded passes (config.cuda_graph) too, between the graphs of the backward.
  // Waits for the GPU to read the loss back (a schedule of passes reads it later: take_loss_sum).
  double forward_backward(const MicroBatch& batch, float loss_scale, const GradReadyFn& on_grad_ready = {});

  // Mean cross-entropy without gradients and without dropout (validation; one pipeline stage).
  double forward_loss(const MicroBatch& batch);

  // Pipeline passes (what a schedule runs): one chunk of this stage on one micro-batch, its
  // activations in slot 0..passes_in_flight-1 from forward_pass until its backward_pass. A chunk
  // without the embedding reads its input from pass_input(slot), which the caller fills first
  // (the previous stage's pass_output); one without the head leaves its output in pass_output(slot).
  // training: dropout on (backward_pass follows); off for evaluate_loss. on_weight_needed, when set,
  // waits once for each parameter the chunk's forward reads that it says is pending, right before its
  // first use, in the order of use (the flat layout's order reversed; with recorded passes too, between
  // the graphs of the forward): the weights may arrive during the forward (the optimizer's
  // overlap_param_sync).
  void forward_pass(int chunk, int slot, const MicroBatch& batch, bool training,
                    const WeightNeeds& on_weight_needed = {});
  // The chunk's backward: a head chunk first runs the classifier on the micro-batch's targets and
  // queues the copy of its losses to the host (take_loss_sum reads them); another chunk needs
  // d(output) in output_grad() first. Gradients are added into grads() as forward_backward does; a
  // chunk without the embedding leaves d(input) in input_grad(slot), where it stays until the
  // slot's next forward_pass. Waits for the GPU only when more passes' losses wait to be taken
  // than the model holds room for, and then only for copies issued before this pass.
  void backward_pass(int chunk, int slot, const MicroBatch& batch, float loss_scale,
                     const GradReadyFn& on_grad_ready = {});
  // The sum of the mean losses of the head chunk's backward passes since the last call, added in
  // the order they ran (0 when none ran). Waits for the GPU up to the last of them only: call it
  // after issuing the work that follows (the optimizer's step) so that the GPU never waits.
  double take_loss_sum() { return loss_reads_.take_sum_of_means(); }
  // A head chunk's mean cross-entropy after forward_pass(training = false); no training pass's
  // loss may be waiting to be taken.
  double evaluate_loss(int chunk, int slot, const MicroBatch& batch);
  // [local rows of batch_size samples, hidden]: what passes between stages (1/tp of the rows with
  // sequence parallelism).
  Tensor pass_input(int slot, int batch_size);
  Tensor pass_output(int slot, int batch_size);
  Tensor output_grad(int batch_size);
  Tensor input_grad(int slot, int batch_size);

  // Logits over the padded vocabulary of the last position of one sequence of
  // 1..seq_length tokens (no dropout). logits.size() must be padded_vocab_size(). Needs
  // tensor_parallel_size 1.
  // On a GPU the logits are copied back to the host span.
  void next_token_logits(std::span<const std::int32_t> tokens, std::span<float> logits);

 private:
  // Frees the workspace, then makes it again for *stream_ (set-up never holds two).
  void remake_workspace();

  struct Chunk {
    ModelChunk layers;
    GptParamIndex index;
  };
  struct Pass {  // what forward ran on, for backward
    int batch = 0;
    int seq = 0;
    Tensor tokens;  // i32 on the model's device (chunks with the embedding)
    bool training = false;
    const Chunk* chunk = nullptr;
    int slot = 0;
    bool writes_grads = false;  // a backward that writes its chunk's gradients (discard_grads) instead of adding
  };

  int chunk_index(const Pass& pass) const { return static_cast<int>(pass.chunk - chunks_.data()); }
  void check_batch(const MicroBatch& batch, const char* what) const;
  // Checks the chunk and slot, selects the slot's saved activations and stages the first sample
  // index its dropout masks start from.
  Pass begin_pass(int chunk, int slot, const MicroBatch& batch, bool training, const char* what);
  // Runs a pass's kernels: directly, or as the recorded graph of (chunk, slot, kind).
  void run_pass(const Pass& pass, PassKind kind, float loss_scale, const StepGraph::Work& work,
                const StepGraph::OnPause& on_pause = {});
  // The pass graphs this model's stream and workspace call for (none with tensor parallelism).
  PassGraphs make_pass_graphs() const;
  const GptParamIndex& whole_model_index(const char* what) const;  // one stage of one chunk only
  void refresh_working_weights();
  // ids as an i32 tensor on the model's device: a copy into `device_ids` from element `at`, in stream order (after
  // the kernels that read the elements before).
  Tensor stage_ids(std::span<const std::int32_t> ids, Buffer& device_ids, std::size_t at = 0);
  Tensor slot_tokens(int slot, std::size_t count);
  void select_slot(int slot, const char* what);              // the saved activations act() sees
  Tensor stream_rows(const Region& region, int batch_size);  // this rank's rows of the residual stream
  // Rows of the residual stream this rank holds, and the first of them (sequence parallelism: 1/tp).
  std::size_t local_rows(const Pass& pass) const;
  std::size_t first_row(const Pass& pass) const;
  // One of the model's layernorms: its parameters, and the regions of its output ([tokens,
  // hidden]) and of its statistics.
  struct NormAt {
    std::size_t weight_param;
    std::size_t bias_param;
    const Region* out;
    const Region* mean;
    const Region* rstd;
  };
  // Layernorm of this rank's rows into their place in `norm.out`; with sequence parallelism
  // the other ranks' rows are all-gathered in. Returns all the rows.
  Tensor layernorm_rows(const Pass& pass, const Tensor& in, const NormAt& norm);
  // residual = x + dropout(branch) (the hidden dropout of `site`) for this rank's rows, and
  // the layernorm of residual as layernorm_rows makes it, by one kernel.
  Tensor residual_layernorm_rows(const Pass& pass, const Tensor& x, const Tensor& branch, std::uint32_t site,
                                 Tensor residual, const NormAt& norm);
  // Sums a row-parallel GEMM's partial [tokens, hidden] over the group; returns this rank's rows of it.
  Tensor reduce_rows(const Pass& pass, Tensor partial);
  // The gradient entering a residual branch (d_residual through that branch's dropout) for all
  // the rows, as the branch's GEMMs read it; with a non-empty d_bias also the gradient of the
  // branch's output bias (its column sums), by the dropout kernel where there is one.
  Tensor branch_grad(const Pass& pass, std::uint32_t site, Tensor d_bias = {});
  // A residual branch by where it joins the stream: its hidden dropout's site and the
  // gradient of its output bias (empty: none).
  struct BranchAt {
    std::uint32_t site;
    Tensor d_bias;
  };
  // The backward of the layernorm `norm` at a seam of the residual stream: d_residual +=
  // its input gradient, and when `below` names the branch that joins the stream there, that
  // branch's gradient as branch_grad makes it, by the same kernel where the rows allow
  // (kernels/residual_layernorm.h); returns it (empty without `below`).
  Tensor seam_backward(const Pass& pass, const Tensor& d_ln_sums, const Tensor& x, const NormAt& norm,
                       const std::optional<BranchAt>& below);
  Tensor embed(const Pass& pass);
  void tp_all_reduce(Tensor data);
  // Every rank's `mine` into `all`, in rank order (in place when `mine` is this rank's block of `all`).
  void tp_all_gather(const Tensor& mine, Tensor all);
  // The row-parallel layers' bias, added once: by tensor-parallel rank 0, before the sum.
  Tensor row_parallel_bias(std::size_t param);
  // before_read(param) comes before the first kernel reading that parameter (when set).
  void forward(const Pass& pass, const std::function<void(std::size_t param)>& before_read);
  void backward(const Pass& pass, const GradReadyFn& on_grad_ready);
  void classifier(const Pass& pass, const Tensor& targets, double grad_scale, bool with_grad);
  // Queues the copy of the classifier's per-token losses of `pass` to the host (loss_reads_).
  void queue_loss_read(const Pass& pass);
  // Refuses `what` while training passes' losses wait to be taken (take_loss_sum).
  void check_losses_taken(const char* what) const;
  // The end of `param`'s part in the backward `pass`: adds (or copies) its gradient from the
  // micro-batch scratch unless its kernels wrote it in place, then reports it.
  void finish_grad(const Pass& pass, std::size_t param, const GradReadyFn& on_grad_ready);
  void zero(Tensor t);
  void copy(const Tensor& src, Tensor dst);  // in stream order

  Tensor act(const Region& region, std::size_t count);
  Tensor weight(std::size_t param);
  // Where the backward `pass` writes `param`'s gradient: its slice of grads() for the linear
  // weights and embeddings (their kernels add, or write in a writing pass), and for every
  // parameter in a writing pass where the slice is aligned as the scratch is and of its dtype
  // (not a bf16 buffer); else its place in the micro-batch scratch.
  Tensor micro_grad(const Pass& pass, std::size_t param);
  bool grad_in_place(const Pass& pass, std::size_t param) const;
  kernels::DropoutArgs dropout_at(const Pass& pass, float probability, std::uint32_t site,
                                  std::uint64_t first_element = 0) const;

  GptConfig config_;
  comm::Communicator* tensor_parallel_;  // null without tensor parallelism
  int tp_rank_;
  PipelineStage stage_;
  ParamList params_;
  std::vector<Chunk> chunks_;
  ModelDtypes dtypes_;
  DType weight_dtype_;
  DType grad_dtype_;        // gradients, layernorm statistics, losses: f32, or f64 for f64 weights
  DType activation_dtype_;  // bf16 on a GPU, else grad_dtype_
  int micro_batch_size_;
  Device device_;
  std::uint64_t seed_;
  std::size_t buffer_numel_;
  std::vector<bool> grad_reduced_over_tp_;  // sequence parallelism: the layernorms' gradients are partial
  ActivationLayout layout_;                 // one chunk's layers
  int passes_in_flight_;
  std::size_t saved_base_ = 0;  // bytes: the saved activations of the pass running now
  Stream own_stream_;
  const Stream* stream_ = &own_stream_;
  std::shared_ptr<const kernels::MatmulAlgorithmTable> matmul_algorithms_;  // null: the heuristics choose
  std::size_t attention_statistics_ = 0;  // bytes of the workspace's attention statistics (ModelMemory)
  std::size_t attention_scores_ = 0;      // bytes of the workspace's score scratch (ModelMemory::attention_scores)
  kernels::Workspace workspace_;          // for *stream_; made in the constructor's body
  PassGraphs pass_graphs_;                // on *stream_, with workspace_

  Buffer weights_;
  Buffer
      working_weights_;  // fp32 copy of 16-bit weights on the CPU; empty when the kernels take the weights as they are
  Buffer grads_;
  Buffer micro_grads_;  // this micro-batch's gradient of the parameters not accumulated in place
  // Each parameter's offset in micro_grads_, or kAccumulatedInPlace for the linear weights.
  std::vector<std::size_t> micro_offsets_;
  static constexpr std::size_t kAccumulatedInPlace = MicroGradLayout::kAccumulatedInPlace;
  Buffer activations_;
  Buffer device_tokens_;   // i32 [passes_in_flight, micro_batch_size, seq_length] on the model's device
  Buffer device_targets_;  // i32 [micro_batch_size, seq_length]
  Buffer pass_samples_;    // u64 [passes_in_flight]: each slot's first sample index, which the dropout kernels read
  // Per chunk: the parameters its backward finishes, in order: what the pauses of its recorded
  // backward report.
  std::vector<std::vector<std::size_t>> grads_finished_;
  // Per chunk: the parameters its forward reads, in order of first use: what the pauses of its
  // recorded forward report.
  std::vector<std::vector<std::size_t>> weights_needed_;
  std::vector<std::uint8_t> grads_discarded_;  // per chunk: its next backward writes its gradients
  Buffer host_statistics_;                     // one row of logits copied back to the host (grad_dtype_)
  LossReadback loss_reads_;                    // the head's per-token losses, copied back after each pass
};

}  // namespace adamant::model
