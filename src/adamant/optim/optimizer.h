#pragma once
// The optimizer interface the trainer drives: FusedAdam (whole model on every
// rank, DDP-style all-reduce) and DistributedFusedAdam (ZeRO-2 sharding).
//
// Who divides by what (average_grad_sync): the model accumulates the gradients of
// its micro-batches into one fp32 buffer (a sum); the gradient sync sums them over
// the data-parallel ranks; the trainer passes grad_scale = 1 / (micro-batches per
// rank * dp size) to step(). The optimizer folds grad_scale, 1 / loss_scale and the
// clipping factor into the single factor the Adam kernel multiplies every gradient
// by. Nobody divides anywhere else, so the sync itself is a plain sum (exact for
// two ranks) and a power-of-two grad_scale is exact too.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "adamant/comm/communicator.h"
#include "adamant/core/dtype.h"
#include "adamant/core/option_checks.h"
#include "adamant/core/param_spec.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/optim/grad_norm_scope.h"
#include "adamant/optim/optimizer_checkpoint.h"

namespace adamant::optim {

// The optimizer's keys with NeMo's (and Apex's) defaults. The training config maps
// model.optim.*, model.megatron_amp_O2, model.native_amp_* / model.hysteresis and
// trainer.gradient_clip_val onto these fields.
struct OptimizerOptions {
  std::string name = "fused_adam";    // model.optim.name: fused_adam | distributed_fused_adam
  double beta1 = 0.9, beta2 = 0.999;  // model.optim.betas
  double eps = 1e-8;                  // model.optim.eps
  double weight_decay = 0.01;         // model.optim.weight_decay (not on biases and layernorm weights)
  bool adam_w_mode = true;            // model.optim.adam_w_mode: decoupled decay (false: L2 added to the gradient)
  double gradient_clip_val = 1.0;     // trainer.gradient_clip_val; 0 = off; clip by global L2 norm
  // model.megatron_amp_O2: half-precision model weights with fp32 main weights in the optimizer.
  bool megatron_amp_O2 = false;
  // The model weights' dtype: trainer.precision with megatron_amp_O2, else f32 (the model weights are the main
  // weights). Not a key: the trainer sets it from those two.
  DType model_dtype = DType::f32;
  double bucket_cap_mb = 100;           // model.optim.bucket_cap_mb (Apex's default)
  bool overlap_grad_sync = true;        // model.optim.overlap_grad_sync
  bool overlap_param_sync = false;      // model.optim.overlap_param_sync
  DType grad_sync_dtype = DType::f32;   // model.optim.grad_sync_dtype; distributed_fused_adam: fp32 or bf16
  bool store_param_remainders = false;  // model.optim.store_param_remainders; distributed_fused_adam, bf16 weights
  // model.optim.update_sms: with overlap_param_sync and store_param_remainders on a GPU, Adam runs on this many
  // SMs beside the next forward, which takes the others; 0: on every SM.
  int update_sms = 48;
  // model.optim.average_grad_sync. true: the synced gradient is the mean over ranks (grad_scale carries 1/dp,
  // see above). false: the sum over ranks of each rank's mean (the optimizer multiplies grad_scale by dp).
  bool average_grad_sync = true;
  // fp16 dynamic loss scaling (used when model_dtype == f16)
  double initial_loss_scale = 4294967296.0;  // model.native_amp_init_scale
  int loss_scale_growth_interval = 1000;     // model.native_amp_growth_interval
  int hysteresis = 2;                        // model.hysteresis

  bool operator==(const OptimizerOptions&) const = default;

  // Throws adamant::Error naming the NeMo key and the fix; `origin` says where a key's value came from.
  void validate(const KeyOrigin& origin = {}) const;
};

struct StepResult {
  double grad_norm;   // L2 norm of the unscaled, averaged gradient, before clipping (inf/NaN when skipped)
  bool skipped;       // non-finite gradient: no update on any rank
  double loss_scale;  // the loss scale after this step's update (what loss_scale() returns now)
};

class Optimizer {
 public:
  virtual ~Optimizer();

  // Flat element count the model must allocate for weights and grads (>= params.total_numel: padding at the end).
  virtual std::size_t padded_numel() const = 0;
  // Called once, after the model allocated its flat buffers of padded_numel elements: weights (model_dtype) and
  // grads (fp32), on the communicator's device, padding zeroed. Copies the weights into the fp32 main weights and
  // allocates every buffer the steps need.
  virtual void attach(Tensor model_weights, Tensor model_grads) = 0;
  virtual double loss_scale() const = 0;  // multiply the loss gradient by this (1 unless fp16)
  // During backward of the LAST micro-batch of a step: the gradient of param `index` is final in model_grads.
  virtual void on_grad_ready(std::size_t index) = 0;
  // Whether on_grad_ready starts work that overlaps the backward (the gradient sync of a bucket over
  // several data-parallel ranks, optimizer.overlap_grad_sync). When not, reporting is optional: step()
  // does whatever was not started.
  virtual bool overlaps_grad_sync() const = 0;
  // The compute stream waits for every parameter all-gather of the previous step: before a forward
  // that does not report the weights it needs, a validation or a checkpoint.
  virtual void wait_for_params() = 0;
  // Whether the next step's first forward should report each weight before its first use
  // (model::WeightNeeds) and call wait_for_param for it instead of wait_for_params before it
  // (overlap_param_sync with all-gathers to wait for): the all-gathers of the weights used later
  // then go on beside the forward.
  virtual bool overlaps_param_sync() const = 0;
  // The compute stream waits for the all-gathers of the buckets that hold parameter `index` (right
  // before the forward's first kernel reading it); the others go on.
  virtual void wait_for_param(std::size_t index) = 0;
  // Whether wait_for_param(index) would still make the compute stream wait: some bucket holding parameter
  // `index` was published and not waited for yet. A recorded forward pauses only where this holds.
  virtual bool weight_pending(std::size_t index) const = 0;
  // After the last micro-batch's backward: finishes the gradient sync, global grad norm, clipping and unscaling
  // folded into one scale, Adam, parameter sync. model_grads is not cleared (the sync may leave summed values in
  // it): the model's next step writes its gradients over it (GptModel::discard_grads) instead of adding them to
  // zeros, so that no pass clears it. Its padding is never written and stays zero.
  // grad_scale multiplies the summed gradients: the trainer passes 1/(micro-batches per rank * dp size).
  virtual StepResult step(double lr, double grad_scale) = 0;
  // Exposed communication: milliseconds the compute stream stood idle waiting for collectives (parameter
  // all-gathers in wait_for_params(), the gradient reduce-scatters or all-reduces and the grad-norm all-reduce in
  // step()) in the waits timed since the last call whose timing is known without blocking. Read it after a host
  // synchronisation (the step's grad-norm read): every wait up to it is known then; a
  // wait at the very end of step() may only be counted by the next call.
  virtual double take_exposed_comm_ms() = 0;
  // Optimizer state held by this rank: fp32 main weights (or u16 remainders; none when the fp32 model weights
  // are the main weights), exp_avg and exp_avg_sq, padding included.
  virtual std::size_t state_bytes() const = 0;
  virtual std::int64_t step_count() const = 0;
  // Every rank writes dir/optim_rank_<r>.adm (fused_adam: rank 0 only); load() reads any earlier layout (other dp
  // size, bucket size, fused_adam <-> distributed_fused_adam), reshards it and rewrites the model weights from the
  // restored main weights. Both are collective over the data-parallel group and need attach() first.
  // With pipeline stages (and tensor-parallel ranks) each saves into a folder of its own and load() reads
  // the folders of all the stages that saved (any stage count), taking each parameter by name.
  // Loading at another tensor-parallel size takes the saved slices through SavedState::remap.
  virtual void save(const std::filesystem::path& dir) const = 0;
  virtual void load(const SavedState& saved) = 0;
  void load(const std::filesystem::path& dir) { load(SavedState::single_folder(dir)); }
};

// Validates the options and builds the optimizer. The optimizer
// shards over the data-parallel group only; with tensor parallelism `params` are this rank's slice
// and norm_scope.tensor_parallel is the tensor-parallel group (grad_norm_scope.h).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, const ParamList& params,
                                          comm::Communicator& data_parallel, const Stream& compute_stream,
                                          GradNormScope norm_scope = {});

}  // namespace adamant::optim
