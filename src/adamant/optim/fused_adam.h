#pragma once
// FusedAdam: every rank holds the whole optimizer state. With dp > 1 the
// gradient buckets are all-reduced (sum) as they fill, like DDP, then one Adam
// kernel runs over the whole flat buffer. With bf16/fp16 weights it keeps fp32
// main weights; with fp32 weights it updates them in place. Everything but the
// all-reduce is BucketedAdam's (bucketed_adam.h).
#include "adamant/optim/bucketed_adam.h"

namespace adamant::optim {

class FusedAdam final : public BucketedAdam {
 public:
  FusedAdam(const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
            const Stream& compute_stream, GradNormScope norm_scope = {});

 private:
  comm::CommHandle start_bucket_sync(Tensor bucket_grads, const Bucket& bucket) override;
};

}  // namespace adamant::optim
