#pragma once
// DistributedFusedAdam (ZeRO-2, docs/distributed_fused_adam.md): each rank
// keeps fp32 main weights (or u16 remainders of the bf16 weights), exp_avg and
// exp_avg_sq for its shard of every bucket only.
//
// Per step: each bucket's gradients are reduce-scattered (sum) in place in the
// model's fp32 grad buffer, or in a bf16 staging copy, as soon as the bucket's
// last gradient is final (overlap_grad_sync); the global grad norm is the
// all-reduce of the shards' squared norms; averaging, the fp16 unscale and
// clipping are one factor inside the Adam kernel; after each bucket's Adam the
// all-gather of its updated shard into the model weights (in place) is issued and
// waited for in wait_for_params() (overlap_param_sync) or at the end of step().
// Every parameter, the tied word embedding included, is waited for before the
// next forward, so no forward ever reads a stale weight.
#include <cstdint>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/kernels/adam.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/bucket_readiness.h"
#include "adamant/optim/comm_wait_timer.h"
#include "adamant/optim/grad_norm_scope.h"
#include "adamant/optim/loss_scaler.h"
#include "adamant/optim/optimizer.h"
#include "adamant/optim/optimizer_checkpoint.h"

namespace adamant::optim {

class DistributedFusedAdam final : public Optimizer {
 public:
  DistributedFusedAdam(const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
                       const Stream& compute_stream, GradNormScope norm_scope = {});
  DistributedFusedAdam(const DistributedFusedAdam&) = delete;
  DistributedFusedAdam& operator=(const DistributedFusedAdam&) = delete;

  std::size_t padded_numel() const override { return plan_.padded_numel(); }
  void attach(Tensor model_weights, Tensor model_grads) override;
  double loss_scale() const override { return loss_scaler_.scale(); }
  void on_grad_ready(std::size_t index) override;
  void wait_for_params() override;
  StepResult step(double lr, double grad_scale) override;
  double take_exposed_comm_ms() override { return comm_waits_.take_done_ms(); }
  std::size_t state_bytes() const override;
  std::int64_t step_count() const override { return step_count_; }
  void save(const std::filesystem::path& dir) const override;
  void load(const std::filesystem::path& dir) override;

  const BucketPlan& plan() const { return plan_; }

 private:
  // This rank's shard of one bucket.
  struct LocalShard {
    std::size_t flat_offset = 0;   // first element of the shard in the model's flat buffers
    std::size_t state_offset = 0;  // first element of the shard in this rank's optimizer state
    std::size_t numel = 0;
    std::size_t segment_begin = 0;       // first i64 of its (begin, end, decay) triples in segments_
    std::size_t segment_count = 0;       // number of i64 values (3 per segment)
    std::size_t norm_segment_begin = 0;  // the same for the segments that count in the grad norm
    std::size_t norm_segment_count = 0;
  };

  bool bf16_grad_sync() const { return options_.grad_sync_dtype == DType::bf16; }
  void issue_grad_sync(std::size_t bucket);
  void issue_param_sync(std::size_t bucket);
  void check_attached(const char* what) const;
  Tensor synced_grad(std::size_t bucket) const;  // this rank's shard of the reduced gradient
  Tensor shard_segments(std::size_t bucket) const;
  Tensor shard_norm_segments(std::size_t bucket) const;
  std::vector<StatePiece> state_pieces() const;
  void adam_on_bucket(const kernels::AdamArgs& args, std::size_t bucket);

  OptimizerOptions options_;
  ParamList params_;
  comm::Communicator& comm_;
  const Stream& stream_;
  int rank_ = 0;
  BucketPlan plan_;
  BucketReadiness readiness_;
  DynamicLossScaler loss_scaler_;
  std::int64_t step_count_ = 0;
  std::vector<LocalShard> shards_;
  std::vector<std::int64_t> segments_host_;
  GradNormScope norm_scope_;
  std::vector<std::int64_t> norm_segments_host_;

  bool attached_ = false;
  Tensor weights_, grads_;
  Buffer main_buffer_, exp_avg_buffer_, exp_avg_sq_buffer_, segments_buffer_, norm_segments_buffer_, norm_buffer_,
      staging_buffer_;
  Tensor main_, exp_avg_, exp_avg_sq_, segments_, norm_segments_, norm_, staging_;  // main_: fp32, or u16 remainders
  std::vector<comm::CommHandle> grad_sync_, param_sync_;
  std::vector<std::uint8_t> grad_sync_issued_;
  CommWaitTimer comm_waits_;  // every stream wait on a collective
};

}  // namespace adamant::optim
