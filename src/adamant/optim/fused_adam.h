#pragma once
// FusedAdam: every rank holds the whole optimizer state. With dp > 1 the
// gradient buckets are all-reduced (sum) as they fill, like DDP, then one Adam
// kernel runs over the whole flat buffer. With bf16/fp16 weights it keeps fp32
// main weights; with fp32 weights it updates them in place.
#include <cstdint>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/optim/bucket_plan.h"
#include "adamant/optim/bucket_readiness.h"
#include "adamant/optim/comm_wait_timer.h"
#include "adamant/optim/grad_norm_scope.h"
#include "adamant/optim/loss_scaler.h"
#include "adamant/optim/optimizer.h"
#include "adamant/optim/optimizer_checkpoint.h"

namespace adamant::optim {

class FusedAdam final : public Optimizer {
 public:
  FusedAdam(const OptimizerOptions& options, const ParamList& params, comm::Communicator& data_parallel,
            const Stream& compute_stream, GradNormScope norm_scope = {});
  FusedAdam(const FusedAdam&) = delete;
  FusedAdam& operator=(const FusedAdam&) = delete;

  std::size_t padded_numel() const override { return plan_.padded_numel(); }
  void attach(Tensor model_weights, Tensor model_grads) override;
  double loss_scale() const override { return loss_scaler_.scale(); }
  void on_grad_ready(std::size_t index) override;
  void wait_for_params() override {}  // the whole model is updated in place on every rank
  StepResult step(double lr, double grad_scale) override;
  double take_exposed_comm_ms() override { return comm_waits_.take_done_ms(); }
  std::size_t state_bytes() const override;
  std::int64_t step_count() const override { return step_count_; }
  void save(const std::filesystem::path& dir) const override;
  void load(const std::filesystem::path& dir) override;

 private:
  bool keeps_main_weights() const { return options_.model_dtype != DType::f32; }
  void issue_grad_sync(std::size_t bucket);
  void check_attached(const char* what) const;
  std::vector<StatePiece> state_pieces() const;

  OptimizerOptions options_;
  ParamList params_;
  comm::Communicator& comm_;
  const Stream& stream_;
  BucketPlan plan_;  // one shard: the all-reduce buckets
  BucketReadiness readiness_;
  DynamicLossScaler loss_scaler_;
  std::int64_t step_count_ = 0;
  std::vector<std::int64_t> segments_host_;  // (begin, end, decay) per parameter, flat offsets
  GradNormScope norm_scope_;
  std::vector<std::int64_t> norm_segments_host_;  // the parameters that count in the grad norm

  bool attached_ = false;
  Tensor weights_, grads_;
  Buffer main_buffer_, exp_avg_buffer_, exp_avg_sq_buffer_, segments_buffer_, norm_segments_buffer_, norm_buffer_;
  // Views of the buffers above; main_ is the fp32 model weights themselves when there is no separate copy.
  Tensor main_, exp_avg_, exp_avg_sq_, segments_, norm_segments_, norm_;
  std::vector<comm::CommHandle> grad_sync_;
  std::vector<std::uint8_t> grad_sync_issued_;
  CommWaitTimer comm_waits_;  // the gradient all-reduce waits
};

}  // namespace adamant::optim
