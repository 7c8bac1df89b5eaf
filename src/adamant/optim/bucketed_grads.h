#pragma once
// The gradient side that FusedAdam and DistributedFusedAdam share, after Megatron's
// param_and_grad_buffer: the model's fp32 gradient buffer cut into buckets
// (bucket_plan.h); which buckets are final during the last backward, and each one's
// sync started as soon as it is (the grad-ready hook); the end of the sync; the
// segment tables of the ranges this rank updates (update_ranges.h); the global grad
// norm in fp64; and the one factor (averaging, loss unscale, clipping) that Adam
// multiplies the synced gradients by, with the fp16 loss scaler. The waits on
// collectives are timed (comm_wait_timer.h).
//
// What a bucket's sync is belongs to the optimizer (GradSync): an all-reduce when
// every rank updates the whole model, a reduce-scatter when each updates its shards.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/core/buffer.h"
#include "adamant/kernels/workspace.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/bucket_readiness.h"
#include "adamant/optim/comm_wait_timer.h"
#include "adamant/optim/grad_norm_scope.h"
#include "adamant/optim/loss_scaler.h"
#include "adamant/optim/optimizer.h"
#include "adamant/optim/step_scale.h"
#include "adamant/optim/update_ranges.h"

namespace adamant::optim {

// How the data-parallel ranks divide the gradients.
enum class GradLayout {
  replicated,  // one shard per bucket; every rank updates the whole model (its buckets sync only with dp > 1)
  sharded,     // one shard per rank in every bucket; a rank updates its shards, its norm is a partial sum
};

// The collective that combines one bucket's gradients over the data-parallel ranks.
class GradSync {
 public:
  // `bucket_grads`: the bucket's gradients (the fp32 buffer, or its bf16 staging copy with bf16
  // sync over several ranks); the communicator is already ordered after the stream's work. The
  // result is read through BucketedGrads::synced_grad once the handle was waited for.
  virtual comm::CommHandle start_bucket_sync(Tensor bucket_grads, const Bucket& bucket) = 0;

 protected:
  ~GradSync() = default;
};

// Whether the sync sends `grads` (the model's gradient buffer dtype) from a bf16 copy: fp32
// gradients synced in bf16 over more than one rank. A bf16 buffer is sent as it is, and one rank
// sends nothing. What BucketedGrads allocates and the memory planner counts.
inline bool sends_bf16_copy(DType sync_dtype, int ranks, DType grads) {
  return sync_dtype == DType::bf16 && ranks > 1 && grads == DType::f32;
}

class BucketedGrads {
 public:
  // Buckets of options.bucket_cap_mb MiB of sync-dtype gradients (fp32; grad_sync_dtype when sharded).
  BucketedGrads(const OptimizerOptions& options, const ParamList& params, GradLayout layout,
                comm::Communicator& data_parallel, const Stream& stream, GradNormScope norm_scope, GradSync& sync);
  BucketedGrads(const BucketedGrads&) = delete;
  BucketedGrads& operator=(const BucketedGrads&) = delete;

  const ParamList& params() const { return params_; }
  const BucketPlan& plan() const { return plan_; }
  const UpdateRanges& ranges() const { return ranges_; }

  // The model's gradient buffer (plan().padded_numel() elements): fp32, or bf16 when syncs_bf16() (the
  // gradients accumulated in the sync dtype, as Apex's buckets; sent as they are). Allocates the
  // device tables, and the bf16 copy an fp32 buffer is sent from when several ranks sync bf16.
  void attach(Tensor model_grads);
  bool syncs_bf16() const { return sync_dtype_ == DType::bf16; }

  // Parameter `param`'s gradient is final: starts the sync of every bucket this completes (overlap_grad_sync).
  void on_grad_ready(std::size_t param);
  // Whether on_grad_ready starts syncs during the backward (overlap on, several ranks).
  bool overlaps_sync() const { return syncs() && options_.overlap_grad_sync && comm_.size() > 1; }
  // After backward, on the stream: starts the buckets not started yet (in bucket order), waits for every
  // sync, computes the global grad norm and from it the step's factor (step_factor()), for Adam to read
  // without the host waiting.
  void finish_sync_on_device(double grad_scale);
  // Then on the host: reads the norm back (the step's one host synchronisation, on the stream only),
  // resolves the same factor from it, with the inputs the device's was resolved with, and updates the
  // loss scaler.
  StepScale read_step_scale();
  // Both, one after the other.
  StepScale finish_sync(double grad_scale) {
    finish_sync_on_device(grad_scale);
    return read_step_scale();
  }
  // The step's factor as finish_sync_on_device leaves it (kernels::AdamArgs::step_factor).
  Tensor step_factor() const { return factor_; }
  // The synced gradient of update range `range`, and its segments (device), for Adam.
  Tensor synced_grad(std::size_t range) const;
  Tensor segments(std::size_t range) const;
  // Resets the readiness for the next step. The gradients stay: the model writes the next step's over them.
  void reset_readiness();

  double loss_scale() const { return loss_scaler_.scale(); }
  DynamicLossScaler& loss_scaler() { return loss_scaler_; }
  const DynamicLossScaler& loss_scaler() const { return loss_scaler_; }
  // Every stream wait on a collective goes through this timer (the optimizer's parameter all-gathers too).
  CommWaitTimer& comm_waits() { return comm_waits_; }

 private:
  bool syncs() const { return layout_ == GradLayout::sharded || comm_.size() > 1; }
  void start_sync(std::size_t bucket);
  Tensor norm_segments(std::size_t range) const;
  void squared_norm();

  OptimizerOptions options_;
  ParamList params_;
  GradLayout layout_;
  comm::Communicator& comm_;
  const Stream& stream_;
  kernels::Workspace workspace_;  // squared_norm's partial sums, on stream_
  GradNormScope norm_scope_;
  GradSync& sync_;
  DType sync_dtype_;     // sizes the buckets
  bool staged_ = false;  // sends_bf16_copy: the sync sends a bf16 copy of the fp32 gradients
  BucketPlan plan_;
  BucketReadiness readiness_;
  UpdateRanges ranges_;
  DynamicLossScaler loss_scaler_;

  Tensor grads_;
  Buffer staging_buffer_, segments_buffer_, norm_segments_buffer_, norm_buffer_, factor_buffer_;
  Tensor staging_, segments_, norm_segments_, norm_;  // staging_: the bf16 copy the sync sends (grad_sync_dtype bf16)
  Tensor factor_;                                     // f32 [2]: the step's grad scale and skip
  // What finish_sync_on_device resolved the factor with, until read_step_scale reads the norm back.
  std::optional<kernels::StepFactorInputs> pending_factor_;
  std::vector<comm::CommHandle> sync_handles_;
  std::vector<std::uint8_t> sync_started_;
  CommWaitTimer comm_waits_;
};

}  // namespace adamant::optim
