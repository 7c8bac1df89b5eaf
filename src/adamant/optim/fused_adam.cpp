#include "adamant/optim/fused_adam.h"

#include <algorithm>

#include "adamant/core/error.h"
#include "adamant/kernels/adam.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/kernels/reduce.h"
#include "adamant/optim/model_buffers.h"
#include "adamant/optim/step_scale.h"

namespace adamant::optim {

FusedAdam::FusedAdam(const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
                     const Stream& compute_stream, GradNormScope norm_scope)
    : options_(options),
      params_(params),
      comm_(data_parallel),
      stream_(compute_stream),
      plan_(params_, BucketPlan::capacity_for(options.bucket_cap_mb, sizeof(float)), 1),
      readiness_(plan_, params_),
      loss_scaler_(make_loss_scaler(options)),
      norm_scope_(norm_scope),
      grad_sync_(plan_.buckets().size()),
      grad_sync_issued_(plan_.buckets().size(), 0) {
  for (const ParamSpec& spec : params_.params) {
    if (spec.numel == 0) continue;
    const auto begin = static_cast<std::int64_t>(spec.offset);
    const auto end = static_cast<std::int64_t>(spec.offset + spec.numel);
    segments_host_.insert(segments_host_.end(), {begin, end, spec.weight_decay ? 1 : 0});
    if (norm_scope_.counts(spec)) norm_segments_host_.insert(norm_segments_host_.end(), {begin, end, 0});
  }
}

std::size_t FusedAdam::state_bytes() const {
  const std::size_t per_element = (keeps_main_weights() ? 4 : 0) + 4 + 4;
  return per_element * plan_.padded_numel();
}

void FusedAdam::check_attached(const char* what) const {
  ADAMANT_CHECK(attached_, "fused_adam: {} before attach(); attach the model's weight and grad buffers first", what);
}

void FusedAdam::attach(Tensor model_weights, Tensor model_grads) {
  ADAMANT_CHECK(!attached_, "fused_adam: attach() called twice");
  check_model_buffers(model_weights, model_grads, plan_.padded_numel(), options_.model_dtype, comm_.device());
  weights_ = model_weights;
  grads_ = model_grads;
  const Device device = comm_.device();
  const std::size_t n = plan_.padded_numel();
  if (keeps_main_weights()) {
    main_buffer_ = Buffer(n * sizeof(float), device);
    main_ = Tensor::of(main_buffer_, DType::f32);
    kernels::cast(weights_, main_, stream_);
  } else {
    main_ = weights_;
  }
  exp_avg_buffer_ = Buffer(n * sizeof(float), device);
  exp_avg_sq_buffer_ = Buffer(n * sizeof(float), device);
  segments_buffer_ = Buffer(segments_host_.size() * sizeof(std::int64_t), device);
  norm_segments_buffer_ = Buffer(norm_segments_host_.size() * sizeof(std::int64_t), device);
  norm_buffer_ = Buffer(sizeof(double), device);
  exp_avg_ = Tensor::of(exp_avg_buffer_, DType::f32);
  exp_avg_sq_ = Tensor::of(exp_avg_sq_buffer_, DType::f32);
  segments_ = Tensor::flat(segments_buffer_.data(), DType::i64, device, segments_host_.size());
  norm_ = Tensor::of(norm_buffer_, DType::f64);
  norm_segments_ = Tensor::flat(norm_segments_buffer_.data(), DType::i64, device, norm_segments_host_.size());
  copy_bytes(segments_.data, device, segments_host_.data(), Device::cpu(), segments_.bytes());
  copy_bytes(norm_segments_.data, device, norm_segments_host_.data(), Device::cpu(), norm_segments_.bytes());
  attached_ = true;
}

void FusedAdam::issue_grad_sync(std::size_t bucket_index) {
  const Bucket& bucket = plan_.buckets()[bucket_index];
  comm_.order_after(stream_);
  grad_sync_[bucket_index] = comm_.all_reduce_async(grads_.slice(bucket.offset, bucket.numel), comm::ReduceOp::sum);
  grad_sync_issued_[bucket_index] = 1;
}

void FusedAdam::on_grad_ready(std::size_t index) {
  check_attached("on_grad_ready");
  readiness_.mark_ready(index);
  if (comm_.size() == 1 || !options_.overlap_grad_sync) return;
  if (plan_.first_bucket(index) > plan_.last_bucket(index)) return;
  for (std::size_t b = plan_.first_bucket(index); b <= plan_.last_bucket(index); ++b) {
    if (readiness_.complete(b) && grad_sync_issued_[b] == 0) issue_grad_sync(b);
  }
}

StepResult FusedAdam::step(double lr, double grad_scale) {
  check_attached("step");
  if (comm_.size() > 1) {
    // Buckets whose readiness was never reported (or overlap off) are issued now, in bucket order.
    for (std::size_t b = 0; b < grad_sync_.size(); ++b) {
      if (grad_sync_issued_[b] == 0) issue_grad_sync(b);
    }
    comm_waits_.time(stream_, [this] {
      for (auto& handle : grad_sync_) handle.wait(stream_);
    });
    std::fill(grad_sync_issued_.begin(), grad_sync_issued_.end(), 0);
  }
  kernels::squared_norm(grads_, norm_segments_, norm_, false, stream_);
  comm_waits_.time(stream_, [this] { norm_scope_.add_tensor_parallel_ranks(norm_, stream_); });
  const double squared_norm = read_squared_norm(norm_, stream_);

  const double sync_scale = options_.average_grad_sync ? 1.0 : static_cast<double>(comm_.size());
  const StepScale scale =
      resolve_step_scale(squared_norm, grad_scale * sync_scale, loss_scaler_.scale(), options_.gradient_clip_val);
  loss_scaler_.update(!scale.finite);
  if (scale.finite) {
    ++step_count_;
    const kernels::AdamArgs args = adam_args_for_step(options_, lr, step_count_, scale.adam_grad_scale);
    kernels::adam_step(args, segments_, grads_, main_, exp_avg_, exp_avg_sq_,
                       keeps_main_weights() ? weights_ : Tensor(), stream_);
  }
  kernels::fill_zero(grads_, stream_);
  readiness_.reset();
  return {scale.grad_norm, !scale.finite, loss_scaler_.scale()};
}

std::vector<StatePiece> FusedAdam::state_pieces() const {
  std::vector<StatePiece> pieces;
  for (std::size_t p = 0; p < params_.size(); ++p) {
    if (params_[p].numel > 0) pieces.push_back({p, 0, params_[p].offset, params_[p].numel});
  }
  return pieces;
}

void FusedAdam::save(const std::filesystem::path& dir) const {
  check_attached("save");
  stream_.synchronize();
  if (comm_.rank() == 0) {  // every rank holds the same state
    const std::size_t n = plan_.padded_numel();
    const std::vector<float> main = download_fp32(main_, n), m = download_fp32(exp_avg_, n),
                             v = download_fp32(exp_avg_sq_, n);
    OptimizerCheckpointInfo info;
    info.optimizer = "fused_adam";
    info.step = step_count_;
    info.loss_scaler = loss_scaler_.state();
    info.dp_size = comm_.size();
    info.rank = 0;
    info.file_count = 1;
    info.bucket_cap_mb = options_.bucket_cap_mb;
    write_optimizer_shard(dir, params_, info, state_pieces(), main, m, v);
  }
  comm_.barrier();  // the checkpoint is complete when save() returns on any rank
}

void FusedAdam::load(const std::filesystem::path& dir) {
  check_attached("load");
  stream_.synchronize();
  const std::size_t n = plan_.padded_numel();
  std::vector<float> main(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  const OptimizerCheckpointInfo info = read_optimizer_state(dir, params_, state_pieces(), main, m, v);
  upload_fp32(main, main_);
  upload_fp32(m, exp_avg_);
  upload_fp32(v, exp_avg_sq_);
  if (keeps_main_weights()) {
    std::vector<std::uint8_t> model(n * dtype_size(options_.model_dtype));
    round_main_to_model(main.data(), model.data(), options_.model_dtype, n);
    copy_bytes(weights_.data, weights_.device, model.data(), Device::cpu(), model.size());
  }
  step_count_ = info.step;
  loss_scaler_.load_state(info.loss_scaler);
  comm_.barrier();
}

}  // namespace adamant::optim
