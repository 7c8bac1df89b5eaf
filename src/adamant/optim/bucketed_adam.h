#pragma once
// The Optimizer both Adam variants are: bucketed gradients (bucketed_grads.h) feeding
// Adam over the ranges this rank updates (adam_state.h), with checkpoints. A variant
// says only what differs (GradLayout, MainWeights and the two collectives):
//
//   FusedAdam             replicated: all-reduce each bucket, Adam over the whole model
//   DistributedFusedAdam  sharded: reduce-scatter each bucket, Adam over this rank's shard
//                         of each bucket, then all-gather the bucket's updated weights
//
// A step: finish the gradient sync, grad norm and step factor (BucketedGrads) on the compute
// stream; Adam on each range on the update stream, a stream of its own, in the order the next
// forward uses their weights (the last range, which holds the tied word embedding, first), after
// which the variant publishes the range's weights (publish_params); wait for them unless
// overlap_param_sync; reset the readiness (the model writes the next step's gradients over
// these: no pass zeroes them). With overlap_param_sync the next forward waits for each weight
// right before it reads it (wait_for_param), so Adam runs beside the forward's first layers
// instead of before them: on model.optim.update_sms SMs (the bulk-copy kernel, bound by its
// instructions there), the forward's kernels on the others; the ranges holding the weight the
// forward reads first on every SM, since nothing can start before them.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "adamant/optim/adam_state.h"
#include "adamant/optim/bucketed_grads.h"
#include "adamant/optim/optimizer.h"

namespace adamant::optim {

class BucketedAdam : public Optimizer, protected GradSync {
 public:
  BucketedAdam(const BucketedAdam&) = delete;
  BucketedAdam& operator=(const BucketedAdam&) = delete;

  std::size_t padded_numel() const override { return grads_.plan().padded_numel(); }
  void attach(Tensor model_weights, Tensor model_grads) override;
  double loss_scale() const override { return grads_.loss_scale(); }
  void on_grad_ready(std::size_t index) override;
  bool overlaps_grad_sync() const override { return grads_.overlaps_sync(); }
  // The compute stream waits for the last step's Adam (the variant: and what it published).
  void wait_for_params() override { updated_.wait_on(stream_); }
  // Weights published only by Adam's writes (one range over the whole model) are waited for at once.
  bool overlaps_param_sync() const override { return false; }
  bool weight_pending(std::size_t index) const override {
    (void)index;
    return false;
  }
  void wait_for_param(std::size_t index) override { (void)index; }
  StepResult step(double lr, double grad_scale) override;
  double take_exposed_comm_ms() override { return grads_.comm_waits().take_done_ms(); }
  std::size_t state_bytes() const override { return state_.bytes(); }
  std::int64_t step_count() const override { return step_count_; }
  void save(const std::filesystem::path& dir) const override;
  using Optimizer::load;
  void load(const SavedState& saved) override;

  const BucketPlan& plan() const { return grads_.plan(); }

 protected:
  // `name`: the model.optim.name of the variant, in errors and checkpoints.
  BucketedAdam(const char* name, GradLayout layout, MainWeights main_weights, const OptimizerOptions& options,
               const ParamList& params, comm::Communicator& data_parallel, const Stream& compute_stream,
               GradNormScope norm_scope);

  // After Adam wrote the model weights of update range `range`, in the update stream's order.
  virtual void publish_params(std::size_t range) { (void)range; }

  const OptimizerOptions& options() const { return options_; }
  comm::Communicator& data_parallel() const { return comm_; }
  const Stream& compute_stream() const { return stream_; }
  const Stream& update_stream() const { return update_stream_; }
  Tensor model_weights() const { return weights_; }
  CommWaitTimer& comm_waits() { return grads_.comm_waits(); }

 private:
  void check_attached(const char* what) const;

  const char* name_;
  GradLayout layout_;
  OptimizerOptions options_;
  comm::Communicator& comm_;
  const Stream& stream_;
  Stream update_stream_;  // Adam's; the compute stream's device
  Event synced_;          // on the compute stream: the gradients are synced and the step's factor known
  Event updated_;         // on the update stream: the last step's Adam is done
  BucketedGrads grads_;
  AdamState state_;
  std::int64_t step_count_ = 0;
  std::vector<int> update_sms_;  // by range: the SMs its Adam runs on (UpdateRanges::sms_beside_forward)
  bool attached_ = false;
  Tensor weights_;
};

}  // namespace adamant::optim
