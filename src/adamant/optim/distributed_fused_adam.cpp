#include "adamant/optim/distributed_fused_adam.h"

#include <algorithm>

namespace adamant::optim {

DistributedFusedAdam::DistributedFusedAdam(const OptimizerOptions& options, const ParamList& params,
                                           comm::Communicator& data_parallel, const Stream& compute_stream,
                                           GradNormScope norm_scope)
    : BucketedAdam("distributed_fused_adam", GradLayout::sharded,
                   options.store_param_remainders ? MainWeights::remainders : MainWeights::fp32, options, params,
                   data_parallel, compute_stream, norm_scope),
      param_sync_(plan().buckets().size()) {}

std::size_t DistributedFusedAdam::rank_offset(const Bucket& bucket) const {
  return static_cast<std::size_t>(data_parallel().rank()) * bucket.shard_numel;
}

comm::CommHandle DistributedFusedAdam::start_bucket_sync(Tensor bucket_grads, const Bucket& bucket) {
  // In place: this rank's block of the bucket receives the sum of everyone's.
  const Tensor recv = bucket_grads.slice(rank_offset(bucket), bucket.shard_numel);
  return data_parallel().reduce_scatter_async(bucket_grads, recv, comm::ReduceOp::sum);
}

void DistributedFusedAdam::publish_params(std::size_t bucket_index) {
  const Bucket& bucket = plan().buckets()[bucket_index];
  const Tensor gathered = model_weights().slice(bucket.offset, bucket.numel);
  data_parallel().order_after(update_stream());  // after this bucket's Adam wrote its shard
  param_sync_[bucket_index] =
      data_parallel().all_gather_async(gathered.slice(rank_offset(bucket), bucket.shard_numel), gathered);
}

void DistributedFusedAdam::wait_for_param(std::size_t index) {
  for (std::size_t b = plan().first_bucket(index); b <= plan().last_bucket(index); ++b) {
    comm::CommHandle& handle = param_sync_[b];
    if (!handle.pending()) continue;
    comm_waits().time(compute_stream(), [&] { handle.wait(compute_stream()); });
  }
}

bool DistributedFusedAdam::weight_pending(std::size_t index) const {
  for (std::size_t b = plan().first_bucket(index); b <= plan().last_bucket(index); ++b) {
    if (param_sync_[b].pending()) return true;
  }
  return false;
}

void DistributedFusedAdam::wait_for_params() {
  const auto pending = [](const comm::CommHandle& handle) { return handle.pending(); };
  if (std::none_of(param_sync_.begin(), param_sync_.end(), pending)) return;
  comm_waits().time(compute_stream(), [this] {
    for (auto& handle : param_sync_) handle.wait(compute_stream());
  });
}

}  // namespace adamant::optim
