#include "adamant/optim/fused_adam.h"

namespace adamant::optim {

FusedAdam::FusedAdam(const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
                     const Stream& compute_stream, GradNormScope norm_scope)
    : BucketedAdam("fused_adam", GradLayout::replicated,
                   options.model_dtype == DType::f32 ? MainWeights::model_weights : MainWeights::fp32, options, params,
                   data_parallel, compute_stream, norm_scope) {}

comm::CommHandle FusedAdam::start_bucket_sync(Tensor bucket_grads, const Bucket& bucket) {
  (void)bucket;  // the whole bucket is reduced on every rank
  return data_parallel().all_reduce_async(bucket_grads, comm::ReduceOp::sum);
}

}  // namespace adamant::optim
