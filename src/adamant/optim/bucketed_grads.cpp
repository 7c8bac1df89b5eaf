#include "adamant/optim/bucketed_grads.h"

#include <algorithm>

#include "adamant/core/half.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"

namespace adamant::optim {

namespace {

// The host table `values` in a new device buffer, and its view.
Tensor upload_table(const std::vector<std::int64_t>& values, Device device, Buffer& buffer) {
  buffer = Buffer(values.size() * sizeof(std::int64_t), device);
  const Tensor table = Tensor::flat(buffer.data(), DType::i64, device, values.size());
  copy_bytes(table.data, device, values.data(), Device::cpu(), table.bytes());
  return table;
}

UpdateRanges ranges_for(GradLayout layout, const BucketPlan& plan, const ParamList& params, int rank,
                        const GradNormScope& norm_scope) {
  if (layout == GradLayout::sharded) return UpdateRanges::rank_shards(plan, params, rank, norm_scope);
  return UpdateRanges::whole_model(params, plan.padded_numel(), norm_scope);
}

}  // namespace

BucketedGrads::BucketedGrads(const OptimizerOptions& options, const ParamList& params, GradLayout layout,
                             comm::Communicator& data_parallel, const Stream& stream, GradNormScope norm_scope,
                             GradSync& sync)
    : options_(options),
      params_(params),
      layout_(layout),
      comm_(data_parallel),
      stream_(stream),
      workspace_(data_parallel.device(), stream, kernels::WorkspaceNeeds{.squared_norm = true}),
      norm_scope_(norm_scope),
      sync_(sync),
      sync_dtype_(layout == GradLayout::sharded ? options.grad_sync_dtype : DType::f32),
      plan_(params_, BucketPlan::capacity_for(options.bucket_cap_mb, dtype_size(sync_dtype_)),
            layout == GradLayout::sharded ? data_parallel.size() : 1),
      readiness_(plan_, params_),
      ranges_(ranges_for(layout, plan_, params_, data_parallel.rank(), norm_scope)),
      loss_scaler_(make_loss_scaler(options)),
      sync_handles_(plan_.buckets().size()),
      sync_started_(plan_.buckets().size(), 0) {}

void BucketedGrads::attach(Tensor model_grads) {
  grads_ = model_grads;
  staged_ = sends_bf16_copy(sync_dtype_, comm_.size(), grads_.dtype);
  const Device device = comm_.device();
  segments_ = upload_table(ranges_.segments(), device, segments_buffer_);
  norm_segments_ = upload_table(ranges_.norm_segments(), device, norm_segments_buffer_);
  norm_buffer_ = Buffer(sizeof(double), device);
  norm_ = Tensor::flat(norm_buffer_.data(), DType::f64, device, 1);
  factor_buffer_ = Buffer(2 * sizeof(float), device);
  factor_ = Tensor::flat(factor_buffer_.data(), DType::f32, device, 2);
  if (staged_) {
    staging_buffer_ = Buffer(plan_.padded_numel() * sizeof(bf16_bits), device);
    staging_ = Tensor::flat(staging_buffer_.data(), DType::bf16, device, plan_.padded_numel());
  }
}

Tensor BucketedGrads::synced_grad(std::size_t range) const {
  const UpdateRange& r = ranges_[range];
  return (staged_ ? staging_ : grads_).slice(r.flat_offset, r.numel);
}

Tensor BucketedGrads::segments(std::size_t range) const {
  return segments_.slice(ranges_[range].segment_begin, ranges_[range].segment_count);
}

Tensor BucketedGrads::norm_segments(std::size_t range) const {
  return norm_segments_.slice(ranges_[range].norm_segment_begin, ranges_[range].norm_segment_count);
}

void BucketedGrads::start_sync(std::size_t bucket_index) {
  const Bucket& bucket = plan_.buckets()[bucket_index];
  Tensor send = grads_.slice(bucket.offset, bucket.numel);
  if (staged_) {
    const Tensor staged = staging_.slice(bucket.offset, bucket.numel);
    kernels::cast(send, staged, stream_);
    send = staged;
  }
  comm_.order_after(stream_);  // the collective starts after the gradients (and the cast) are written
  sync_handles_[bucket_index] = sync_.start_bucket_sync(send, bucket);
  sync_started_[bucket_index] = 1;
}

void BucketedGrads::on_grad_ready(std::size_t param) {
  readiness_.mark_ready(param);
  if (!syncs() || !options_.overlap_grad_sync) return;
  if (plan_.first_bucket(param) > plan_.last_bucket(param)) return;  // empty parameter
  for (std::size_t b = plan_.first_bucket(param); b <= plan_.last_bucket(param); ++b) {
    if (readiness_.complete(b) && sync_started_[b] == 0) start_sync(b);
  }
}

void BucketedGrads::squared_norm() {
  // fp64 throughout: each range adds its squares to one value, the ranks' values are summed (sharded), and
  // the norm is rounded once, into the fp32 Adam factor. The order of the sums is fixed, so is the result.
  for (std::size_t r = 0; r < ranges_.size(); ++r) {
    kernels::squared_norm(synced_grad(r), norm_segments(r), norm_, r > 0, workspace_, stream_);
  }
  const bool partial = layout_ == GradLayout::sharded;  // a replicated rank already holds the whole sum
  if (partial) comm_.order_after(stream_);
  comm_waits_.time(stream_, [this, partial] {
    if (partial) comm_.all_reduce_async(norm_, comm::ReduceOp::sum).wait(stream_);
    norm_scope_.add_model_parallel_ranks(norm_, stream_);
  });
}

void BucketedGrads::finish_sync_on_device(double grad_scale) {
  ADAMANT_CHECK(!pending_factor_, "BucketedGrads: finish_sync_on_device twice without read_step_scale");
  if (syncs()) {
    // Buckets whose readiness was never reported (or overlap off) start now, in bucket order.
    for (std::size_t b = 0; b < sync_handles_.size(); ++b) {
      if (sync_started_[b] == 0) start_sync(b);
    }
    comm_waits_.time(stream_, [this] {
      for (auto& handle : sync_handles_) handle.wait(stream_);
    });
    std::fill(sync_started_.begin(), sync_started_.end(), 0);
  }
  squared_norm();
  const double sync_scale = options_.average_grad_sync ? 1.0 : static_cast<double>(comm_.size());
  pending_factor_ =
      kernels::StepFactorInputs{grad_scale * sync_scale, loss_scaler_.scale(), options_.gradient_clip_val};
  kernels::resolve_step_factor(norm_, *pending_factor_, factor_, stream_);
}

StepScale BucketedGrads::read_step_scale() {
  ADAMANT_CHECK(pending_factor_, "BucketedGrads: read_step_scale before finish_sync_on_device");
  // The same function of the same norm and inputs as the factor on the device, so the same bits.
  const StepScale scale = kernels::step_factor_of(read_squared_norm(norm_, stream_), *pending_factor_);
  pending_factor_.reset();
  loss_scaler_.update(!scale.finite);  // the norm is identical on every rank, so is every decision here
  return scale;
}

void BucketedGrads::reset_readiness() { readiness_.reset(); }

}  // namespace adamant::optim
