#include "adamant/optim/bucketed_adam.h"

#include "adamant/core/error.h"
#include "adamant/optim/model_buffers.h"
#include "adamant/optim/optimizer_checkpoint.h"

namespace adamant::optim {

BucketedAdam::BucketedAdam(const char* name, GradLayout layout, MainWeights main_weights,
                           const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
                           const Stream& compute_stream, GradNormScope norm_scope)
    : name_(name),
      layout_(layout),
      options_(options),
      comm_(data_parallel),
      stream_(compute_stream),
      update_stream_(compute_stream.device()),
      synced_(compute_stream.device()),
      updated_(compute_stream.device()),
      grads_(options, params, layout, data_parallel, compute_stream, norm_scope, *this),
      state_(main_weights, options.model_dtype, grads_.ranges()) {}

void BucketedAdam::check_attached(const char* what) const {
  ADAMANT_CHECK(attached_, "{}: {} before attach(); attach the model's weight and grad buffers first", name_, what);
}

void BucketedAdam::attach(Tensor model_weights, Tensor model_grads) {
  ADAMANT_CHECK(!attached_, "{}: attach() called twice", name_);
  check_model_buffers(model_weights, model_grads, padded_numel(), options_.model_dtype, comm_.device(),
                      grads_.syncs_bf16());
  weights_ = model_weights;
  state_.attach(model_weights, stream_);
  grads_.attach(model_grads);
  // Beside the next forward Adam takes a few SMs, bound by its instructions there, and leaves the rest to the
  // forward's kernels; before it (no overlap) the whole GPU.
  update_sms_ = grads_.ranges().sms_beside_forward(grads_.params(), overlaps_param_sync() ? options_.update_sms : 0);
  attached_ = true;
}

void BucketedAdam::on_grad_ready(std::size_t index) {
  check_attached("on_grad_ready");
  grads_.on_grad_ready(index);
}

StepResult BucketedAdam::step(double lr, double grad_scale) {
  check_attached("step");
  wait_for_params();  // normally done already, before this step's forward
  grads_.finish_sync_on_device(grad_scale);
  // Adam is queued before the host reads the norm back: it reads the step's factor on the device and
  // leaves everything as it is where the norm is not finite, so the GPU goes from the norm into Adam
  // without waiting for the host. Its step count is this step's, which counts if the norm is finite.
  const kernels::AdamArgs args = adam_args_for_step(options_, lr, step_count_ + 1, grads_.step_factor());
  // Adam reads the synced gradients and writes the weights the next forward reads: it follows the
  // compute stream's work so far, and the forward waits for it (wait_for_params or wait_for_param).
  synced_.record(stream_);
  synced_.wait_on(update_stream_);
  // The layout is in reverse order of use: the last range's weights are the next forward's first.
  for (std::size_t r = grads_.ranges().size(); r-- > 0;) {
    state_.update(args, r, grads_.segments(r), grads_.synced_grad(r), update_stream_, update_sms_[r]);
    publish_params(r);  // overlaps with the next ranges' Adam (a skipped step's weights, unchanged)
  }
  updated_.record(update_stream_);
  const StepScale scale = grads_.read_step_scale();  // while Adam runs
  if (scale.finite) ++step_count_;
  if (!options_.overlap_param_sync) wait_for_params();
  grads_.reset_readiness();
  return {scale.grad_norm, !scale.finite, grads_.loss_scale()};
}

void BucketedAdam::save(const std::filesystem::path& dir) const {
  check_attached("save");
  // Pending all-gathers (overlap_param_sync) only write other ranks' blocks; this rank's ranges are final
  // once Adam is done.
  update_stream_.synchronize();
  stream_.synchronize();
  const bool sharded = layout_ == GradLayout::sharded;
  if (sharded || comm_.rank() == 0) {  // replicated: every rank holds the same state, rank 0 writes it
    const HostAdamState host = state_.download();
    OptimizerCheckpointInfo info;
    info.optimizer = name_;
    info.step = step_count_;
    info.loss_scaler = grads_.loss_scaler().state();
    info.dp_size = comm_.size();
    info.rank = sharded ? comm_.rank() : 0;
    info.file_count = sharded ? comm_.size() : 1;
    info.bucket_cap_mb = options_.bucket_cap_mb;
    write_optimizer_shard(dir, grads_.params(), info, grads_.ranges().state_pieces(), host.main, host.exp_avg,
                          host.exp_avg_sq);
  }
  comm_.barrier();  // the checkpoint is complete when save() returns on any rank
}

void BucketedAdam::load(const SavedState& saved) {
  check_attached("load");
  wait_for_params();
  update_stream_.synchronize();
  stream_.synchronize();
  HostAdamState host(grads_.ranges().state_numel());
  const OptimizerCheckpointInfo info = read_optimizer_state(saved, grads_.params(), grads_.ranges().state_pieces(),
                                                            host.main, host.exp_avg, host.exp_avg_sq);
  state_.upload(host);
  for (std::size_t r = 0; r < grads_.ranges().size(); ++r) publish_params(r);
  wait_for_params();
  stream_.synchronize();
  step_count_ = info.step;
  grads_.loss_scaler().load_state(info.loss_scaler);
  comm_.barrier();
}

}  // namespace adamant::optim
