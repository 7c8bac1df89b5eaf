#pragma once
// DistributedFusedAdam (ZeRO-2, docs/distributed_fused_adam.md): each rank
// keeps fp32 main weights (or u16 remainders of the bf16 weights), exp_avg and
// exp_avg_sq for its shard of every bucket only.
//
// Per step: each bucket's gradients are reduce-scattered (sum) in place in the
// model's fp32 grad buffer, or in a bf16 staging copy, as soon as the bucket's
// last gradient is final (overlap_grad_sync); the global grad norm is the
// all-reduce of the shards' squared norms; averaging, the fp16 unscale and
// clipping are one factor inside the Adam kernel; after each bucket's Adam (the
// buckets in the order the next forward uses them) the all-gather of its updated
// shard into the model weights (in place) is issued. With overlap_param_sync the
// next step's first forward waits for each bucket right before
// its first weight is read (wait_for_param), so Adam and the all-gathers of the later
// layers go on beside the forward (on one rank: Adam alone, the all-gather is the weights in
// place); otherwise all are waited for at the end of step().
// Every parameter, the tied word embedding included, is waited for before a
// forward reads it, so no forward ever reads a stale weight.
//
// The buckets, their readiness, the norm, the step factor, Adam and checkpoints are
// BucketedAdam's (bucketed_adam.h); this class adds the reduce-scatter and the
// all-gathers.
#include <vector>

#include "adamant/optim/bucketed_adam.h"

namespace adamant::optim {

class DistributedFusedAdam final : public BucketedAdam {
 public:
  DistributedFusedAdam(const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
                       const Stream& compute_stream, GradNormScope norm_scope = {});

  void wait_for_params() override;
  // overlap_param_sync, on any number of ranks: one rank gathers nothing, but its forward still starts
  // before Adam has updated the weights of its later layers.
  bool overlaps_param_sync() const override { return options().overlap_param_sync; }
  void wait_for_param(std::size_t index) override;
  bool weight_pending(std::size_t index) const override;

 private:
  comm::CommHandle start_bucket_sync(Tensor bucket_grads, const Bucket& bucket) override;
  // The update range of a sharded layout is this rank's shard of the bucket with the same index.
  void publish_params(std::size_t bucket) override;

  std::size_t rank_offset(const Bucket& bucket) const;

  std::vector<comm::CommHandle> param_sync_;  // one all-gather per bucket
};

}  // namespace adamant::optim
