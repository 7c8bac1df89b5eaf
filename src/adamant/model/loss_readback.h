#pragma once
// The mean losses of training passes, read back without making the host wait for the GPU.
// Each pass's per-token losses are copied on the model's stream into host memory the stream
// copies into asynchronously; the host sums them (in order, in fp64) only when asked, which the
// trainer does after it has issued the step's optimizer work, so the GPU goes from the last
// backward kernel straight into the optimizer's.
#include <cstddef>
#include <vector>

#include "adamant/core/buffer.h"
#include "adamant/core/dtype.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::model {

class LossReadback {
 public:
  // Host room for `passes` passes of up to `max_tokens` losses of `dtype` (fp32 or fp64)
  // computed on `device`. A pass queued when that room is full first adds the passes
  // waiting into the running sum: a wait for copies issued before the pass's own work.
  static constexpr int kDefaultPasses = 2;
  LossReadback() = default;  // room for nothing: assign a made one before queueing
  LossReadback(std::size_t max_tokens, DType dtype, Device device, int passes = kDefaultPasses);

  // Host bytes the constructor allocates.
  static std::size_t host_bytes(std::size_t max_tokens, DType dtype, int passes = kDefaultPasses);

  // Copies `losses` (one per token, `dtype`, on the device) after the work issued on `stream`.
  void queue(const Tensor& losses, const Stream& stream);
  // The sum, over the passes queued since the last take, of each pass's mean loss, added in
  // the order they were queued (0 when none). Waits for their copies.
  double take_sum_of_means();
  // Passes queued and not yet taken, folded or not.
  int untaken() const { return untaken_; }

 private:
  void fold();  // waits for the copies queued and adds their means into folded_

  std::size_t max_tokens_ = 0;
  DType dtype_ = DType::f32;
  int passes_ = 0;
  Buffer host_;
  Event copied_;                     // recorded after the last copy queued
  std::vector<std::size_t> queued_;  // tokens of each pass whose copy is in host_, not yet folded
  double folded_ = 0;
  int untaken_ = 0;
};

}  // namespace adamant::model
