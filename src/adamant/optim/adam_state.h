#pragma once
// The Adam state one rank holds for its update ranges (update_ranges.h): main weights,
// exp_avg and exp_avg_sq, one flat buffer each with the ranges back to back; the Adam
// update of one range; and the state as fp32 host arrays for checkpoints.
#include <cstddef>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/dtype.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/adam.h"
#include "adamant/optim/update_ranges.h"

namespace adamant::optim {

enum class MainWeights {
  model_weights,  // fp32 model weights that are their own main weights (whole model only): updated in place
  fp32,           // a separate fp32 copy
  remainders,     // the low 16 bits of each fp32 main weight; the bf16 model weight is the high half
};

// The state of every range as fp32 host arrays of UpdateRanges::state_numel() elements.
struct HostAdamState {
  explicit HostAdamState(std::size_t numel) : main(numel, 0.0f), exp_avg(numel, 0.0f), exp_avg_sq(numel, 0.0f) {}
  std::vector<float> main, exp_avg, exp_avg_sq;
};

class AdamState {
 public:
  // `ranges` must outlive the state.
  AdamState(MainWeights main_weights, DType model_dtype, const UpdateRanges& ranges);
  AdamState(const AdamState&) = delete;
  AdamState& operator=(const AdamState&) = delete;

  // Bytes of state held: main weights (none for model_weights), exp_avg and exp_avg_sq.
  std::size_t bytes() const;
  // Allocates the state on the model weights' device; the main weights start as the model weights (exactly:
  // remainders start at 0, which rebuilds the same fp32 values from the bf16 weights).
  void attach(Tensor model_weights, const Stream& stream);
  // One Adam step over range `range`: `segments` and `grad` are the range's (BucketedGrads); writes the
  // range's model weights.
  // sm_count > 0: on that many SMs (remainders on a GPU; kernels::adam_step_remainder).
  void update(const kernels::AdamArgs& args, std::size_t range, const Tensor& segments, const Tensor& grad,
              const Stream& stream, int sm_count = 0);

  // The state as fp32 (remainders joined with their bf16 weights). Call after a stream synchronisation.
  HostAdamState download() const;
  // Restores the state and rewrites the model weights of every range from the main weights, rounded as
  // Adam rounds them.
  void upload(const HostAdamState& host);

 private:
  MainWeights main_weights_;
  DType model_dtype_;
  const UpdateRanges& ranges_;
  Tensor weights_;
  Buffer main_buffer_, exp_avg_buffer_, exp_avg_sq_buffer_;
  Tensor main_, exp_avg_, exp_avg_sq_;  // main_: fp32, u16 remainders, or the fp32 model weights themselves
};

}  // namespace adamant::optim
