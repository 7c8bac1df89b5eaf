#include "adamant/optim/distributed_fused_adam.h"

#include <algorithm>

#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#include "adamant/optim/model_buffers.h"
#include "adamant/optim/step_scale.h"

namespace adamant::optim {

DistributedFusedAdam::DistributedFusedAdam(const OptimizerOptions& options, const ParamList& params,
                                           comm::Communicator& data_parallel, const Stream& compute_stream,
                                           GradNormScope norm_scope)
    : options_(options),
      params_(params),
      comm_(data_parallel),
      stream_(compute_stream),
      rank_(data_parallel.rank()),
      plan_(params_, BucketPlan::capacity_for(options.bucket_cap_mb, dtype_size(options.grad_sync_dtype)),
            data_parallel.size()),
      readiness_(plan_, params_),
      loss_scaler_(make_loss_scaler(options)),
      norm_scope_(norm_scope),
      grad_sync_(plan_.buckets().size()),
      param_sync_(plan_.buckets().size()),
      grad_sync_issued_(plan_.buckets().size(), 0) {
  // The segments of this rank's shards (offsets relative to each shard), built once: all of them
  // for Adam, and those that count in the grad norm.
  for (std::size_t b = 0; b < plan_.buckets().size(); ++b) {
    const Bucket& bucket = plan_.buckets()[b];
    LocalShard shard;
    shard.flat_offset = bucket.offset + static_cast<std::size_t>(rank_) * bucket.shard_numel;
    shard.state_offset = plan_.shard_state_offset(b);
    shard.numel = bucket.shard_numel;
    shard.segment_begin = segments_host_.size();
    shard.norm_segment_begin = norm_segments_host_.size();
    for (const ShardFragment& piece : plan_.shard_fragments(b, rank_)) {
      const auto begin = static_cast<std::int64_t>(piece.shard_offset);
      const auto end = static_cast<std::int64_t>(piece.shard_offset + piece.numel);
      const ParamSpec& spec = params_[piece.param];
      segments_host_.insert(segments_host_.end(), {begin, end, spec.weight_decay ? 1 : 0});
      if (norm_scope_.counts(spec)) norm_segments_host_.insert(norm_segments_host_.end(), {begin, end, 0});
    }
    shard.segment_count = segments_host_.size() - shard.segment_begin;
    shard.norm_segment_count = norm_segments_host_.size() - shard.norm_segment_begin;
    shards_.push_back(shard);
  }
}

std::size_t DistributedFusedAdam::state_bytes() const {
  const std::size_t main_bytes = options_.store_param_remainders ? sizeof(std::uint16_t) : sizeof(float);
  return (main_bytes + 2 * sizeof(float)) * plan_.shard_numel_total();
}

void DistributedFusedAdam::check_attached(const char* what) const {
  ADAMANT_CHECK(attached_,
                "distributed_fused_adam: {} before attach(); attach the model's weight and grad buffers "
                "first",
                what);
}

void DistributedFusedAdam::attach(Tensor model_weights, Tensor model_grads) {
  ADAMANT_CHECK(!attached_, "distributed_fused_adam: attach() called twice");
  check_model_buffers(model_weights, model_grads, plan_.padded_numel(), options_.model_dtype, comm_.device());
  weights_ = model_weights;
  grads_ = model_grads;
  const Device device = comm_.device();
  const std::size_t n = plan_.shard_numel_total();
  const DType main_dtype = options_.store_param_remainders ? DType::u16 : DType::f32;
  main_buffer_ = Buffer(n * dtype_size(main_dtype), device);
  exp_avg_buffer_ = Buffer(n * sizeof(float), device);
  exp_avg_sq_buffer_ = Buffer(n * sizeof(float), device);
  segments_buffer_ = Buffer(segments_host_.size() * sizeof(std::int64_t), device);
  norm_segments_buffer_ = Buffer(norm_segments_host_.size() * sizeof(std::int64_t), device);
  norm_buffer_ = Buffer(sizeof(double), device);
  main_ = Tensor::flat(main_buffer_.data(), main_dtype, device, n);
  exp_avg_ = Tensor::flat(exp_avg_buffer_.data(), DType::f32, device, n);
  exp_avg_sq_ = Tensor::flat(exp_avg_sq_buffer_.data(), DType::f32, device, n);
  segments_ = Tensor::flat(segments_buffer_.data(), DType::i64, device, segments_host_.size());
  norm_segments_ = Tensor::flat(norm_segments_buffer_.data(), DType::i64, device, norm_segments_host_.size());
  norm_ = Tensor::flat(norm_buffer_.data(), DType::f64, device, 1);
  copy_bytes(segments_.data, device, segments_host_.data(), Device::cpu(), segments_.bytes());
  copy_bytes(norm_segments_.data, device, norm_segments_host_.data(), Device::cpu(), norm_segments_.bytes());
  if (bf16_grad_sync()) {
    staging_buffer_ = Buffer(plan_.padded_numel() * sizeof(bf16_bits), device);
    staging_ = Tensor::flat(staging_buffer_.data(), DType::bf16, device, plan_.padded_numel());
  }
  // fp32 main weights start as the model weights (exact); remainders start at 0 (the buffer is zeroed), which
  // rebuilds the same fp32 values from the bf16 weights.
  if (!options_.store_param_remainders) {
    for (const LocalShard& shard : shards_) {
      kernels::cast(weights_.slice(shard.flat_offset, shard.numel), main_.slice(shard.state_offset, shard.numel),
                    stream_);
    }
  }
  attached_ = true;
}

Tensor DistributedFusedAdam::synced_grad(std::size_t bucket) const {
  const LocalShard& shard = shards_[bucket];
  return (bf16_grad_sync() ? staging_ : grads_).slice(shard.flat_offset, shard.numel);
}

Tensor DistributedFusedAdam::shard_segments(std::size_t bucket) const {
  const LocalShard& shard = shards_[bucket];
  return segments_.slice(shard.segment_begin, shard.segment_count);
}

Tensor DistributedFusedAdam::shard_norm_segments(std::size_t bucket) const {
  const LocalShard& shard = shards_[bucket];
  return norm_segments_.slice(shard.norm_segment_begin, shard.norm_segment_count);
}

void DistributedFusedAdam::issue_grad_sync(std::size_t bucket_index) {
  const Bucket& bucket = plan_.buckets()[bucket_index];
  Tensor send = grads_.slice(bucket.offset, bucket.numel);
  if (bf16_grad_sync()) {
    Tensor staged = staging_.slice(bucket.offset, bucket.numel);
    kernels::cast(send, staged, stream_);
    send = staged;
  }
  comm_.order_after(stream_);  // the collective starts after the gradients (and the cast) are written
  const Tensor recv = send.slice(static_cast<std::size_t>(rank_) * bucket.shard_numel, bucket.shard_numel);
  grad_sync_[bucket_index] = comm_.reduce_scatter_async(send, recv, comm::ReduceOp::sum);
  grad_sync_issued_[bucket_index] = 1;
}

void DistributedFusedAdam::issue_param_sync(std::size_t bucket_index) {
  const Bucket& bucket = plan_.buckets()[bucket_index];
  const Tensor gathered = weights_.slice(bucket.offset, bucket.numel);
  comm_.order_after(stream_);  // after this bucket's Adam wrote its shard
  param_sync_[bucket_index] = comm_.all_gather_async(
      gathered.slice(static_cast<std::size_t>(rank_) * bucket.shard_numel, bucket.shard_numel), gathered);
}

void DistributedFusedAdam::on_grad_ready(std::size_t index) {
  check_attached("on_grad_ready");
  readiness_.mark_ready(index);
  if (!options_.overlap_grad_sync || plan_.first_bucket(index) > plan_.last_bucket(index)) return;
  for (std::size_t b = plan_.first_bucket(index); b <= plan_.last_bucket(index); ++b) {
    if (readiness_.complete(b) && grad_sync_issued_[b] == 0) issue_grad_sync(b);
  }
}

void DistributedFusedAdam::wait_for_params() {
  const auto pending = [](const comm::CommHandle& handle) { return handle.pending(); };
  if (std::none_of(param_sync_.begin(), param_sync_.end(), pending)) return;
  comm_waits_.time(stream_, [this] {
    for (auto& handle : param_sync_) handle.wait(stream_);
  });
}

void DistributedFusedAdam::adam_on_bucket(const kernels::AdamArgs& args, std::size_t bucket) {
  const LocalShard& shard = shards_[bucket];
  const Tensor model_shard = weights_.slice(shard.flat_offset, shard.numel);
  const Tensor main = main_.slice(shard.state_offset, shard.numel);
  const Tensor m = exp_avg_.slice(shard.state_offset, shard.numel);
  const Tensor v = exp_avg_sq_.slice(shard.state_offset, shard.numel);
  if (options_.store_param_remainders) {
    kernels::adam_step_remainder(args, shard_segments(bucket), synced_grad(bucket), main, m, v, model_shard, stream_);
  } else {
    kernels::adam_step(args, shard_segments(bucket), synced_grad(bucket), main, m, v, model_shard, stream_);
  }
}

StepResult DistributedFusedAdam::step(double lr, double grad_scale) {
  check_attached("step");
  wait_for_params();  // normally done already, before this step's forward
  const std::size_t bucket_count = plan_.buckets().size();
  for (std::size_t b = 0; b < bucket_count; ++b) {
    if (grad_sync_issued_[b] == 0) issue_grad_sync(b);
  }
  comm_waits_.time(stream_, [this] {
    for (auto& handle : grad_sync_) handle.wait(stream_);
  });
  std::fill(grad_sync_issued_.begin(), grad_sync_issued_.end(), 0);

  // Global norm: each rank's squared norm over its shards, summed over the ranks, all in fp64: the
  // norm is rounded once (to the fp32 Adam scale), as fused_adam rounds its one sum.
  for (std::size_t b = 0; b < bucket_count; ++b) {
    kernels::squared_norm(synced_grad(b), shard_norm_segments(b), norm_, b > 0, stream_);
  }
  comm_.order_after(stream_);
  comm_waits_.time(stream_, [this] {
    comm_.all_reduce_async(norm_, comm::ReduceOp::sum).wait(stream_);
    norm_scope_.add_tensor_parallel_ranks(norm_, stream_);
  });
  const double squared_norm = read_squared_norm(norm_, stream_);

  const double sync_scale = options_.average_grad_sync ? 1.0 : static_cast<double>(comm_.size());
  const StepScale scale =
      resolve_step_scale(squared_norm, grad_scale * sync_scale, loss_scaler_.scale(), options_.gradient_clip_val);
  loss_scaler_.update(!scale.finite);  // the norm is identical on every rank, so is every decision here
  if (scale.finite) {
    ++step_count_;
    const kernels::AdamArgs args = adam_args_for_step(options_, lr, step_count_, scale.adam_grad_scale);
    for (std::size_t b = 0; b < bucket_count; ++b) {
      adam_on_bucket(args, b);
      issue_param_sync(b);  // overlaps with the next buckets' Adam
    }
    if (!options_.overlap_param_sync) wait_for_params();
  }
  kernels::fill_zero(grads_, stream_);
  readiness_.reset();
  return {scale.grad_norm, !scale.finite, loss_scaler_.scale()};
}

std::vector<StatePiece> DistributedFusedAdam::state_pieces() const {
  std::vector<StatePiece> pieces;
  for (std::size_t b = 0; b < plan_.buckets().size(); ++b) {
    for (const ShardFragment& piece : plan_.shard_fragments(b, rank_)) {
      pieces.push_back({piece.param, piece.param_offset, shards_[b].state_offset + piece.shard_offset, piece.numel});
    }
  }
  return pieces;
}

void DistributedFusedAdam::save(const std::filesystem::path& dir) const {
  check_attached("save");
  // Pending all-gathers (overlap_param_sync) only write other ranks' blocks; this rank's shard is final.
  stream_.synchronize();
  const std::size_t n = plan_.shard_numel_total();
  std::vector<float> main(n);
  if (options_.store_param_remainders) {
    // Rebuild the fp32 main weights from the bf16 model weights and the remainders.
    std::vector<bf16_bits> high(n), low(n);
    for (const LocalShard& shard : shards_) {
      copy_bytes(high.data() + shard.state_offset, Device::cpu(), weights_.slice(shard.flat_offset, shard.numel).data,
                 weights_.device, shard.numel * sizeof(bf16_bits));
    }
    copy_bytes(low.data(), Device::cpu(), main_.data, main_.device, n * sizeof(std::uint16_t));
    for (std::size_t i = 0; i < n; ++i) main[i] = join_remainder(high[i], low[i]);
  } else {
    main = download_fp32(main_, n);
  }
  const std::vector<float> m = download_fp32(exp_avg_, n), v = download_fp32(exp_avg_sq_, n);
  OptimizerCheckpointInfo info;
  info.optimizer = "distributed_fused_adam";
  info.step = step_count_;
  info.loss_scaler = loss_scaler_.state();
  info.dp_size = comm_.size();
  info.rank = rank_;
  info.file_count = comm_.size();
  info.bucket_cap_mb = options_.bucket_cap_mb;
  write_optimizer_shard(dir, params_, info, state_pieces(), main, m, v);
  comm_.barrier();  // the checkpoint is complete when save() returns on any rank
}

void DistributedFusedAdam::load(const std::filesystem::path& dir) {
  check_attached("load");
  wait_for_params();
  stream_.synchronize();
  const std::size_t n = plan_.shard_numel_total();
  std::vector<float> main(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  const OptimizerCheckpointInfo info = read_optimizer_state(dir, params_, state_pieces(), main, m, v);
  upload_fp32(m, exp_avg_);
  upload_fp32(v, exp_avg_sq_);
  // The model weights of this rank's shards are the restored main weights rounded as Adam rounds them.
  std::vector<std::uint8_t> model(n * dtype_size(options_.model_dtype));
  round_main_to_model(main.data(), model.data(), options_.model_dtype, n);
  if (options_.store_param_remainders) {
    std::vector<std::uint16_t> low(n);
    const auto* high = reinterpret_cast<const bf16_bits*>(model.data());
    for (std::size_t i = 0; i < n; ++i) low[i] = remainder_of(main[i], high[i]);
    copy_bytes(main_.data, main_.device, low.data(), Device::cpu(), n * sizeof(std::uint16_t));
  } else {
    upload_fp32(main, main_);
  }
  const std::size_t model_element = dtype_size(options_.model_dtype);
  for (std::size_t b = 0; b < shards_.size(); ++b) {
    const LocalShard& shard = shards_[b];
    copy_bytes(weights_.slice(shard.flat_offset, shard.numel).data, weights_.device,
               model.data() + shard.state_offset * model_element, Device::cpu(), shard.numel * model_element);
    issue_param_sync(b);
  }
  wait_for_params();
  stream_.synchronize();
  step_count_ = info.step;
  loss_scaler_.load_state(info.loss_scaler);
}

}  // namespace adamant::optim
