#include "adamant/model/loss_readback.h"

#include "adamant/comm/comm_stream.h"
#include "adamant/core/error.h"

namespace adamant::model {

LossReadback::LossReadback(std::size_t max_tokens, DType dtype, Device device, int passes)
    : max_tokens_(max_tokens),
      dtype_(dtype),
      passes_(passes),
      host_(Buffer::host_for(host_bytes(max_tokens, dtype, passes), device)),
      copied_(device) {
  ADAMANT_CHECK(dtype == DType::f32 || dtype == DType::f64, "LossReadback: losses in {}; they are fp32 or fp64",
                dtype_name(dtype));
  ADAMANT_CHECK(passes >= 1, "LossReadback: room for {} passes; it needs at least one", passes);
  queued_.reserve(static_cast<std::size_t>(passes));
}

std::size_t LossReadback::host_bytes(std::size_t max_tokens, DType dtype, int passes) {
  return max_tokens * dtype_size(dtype) * static_cast<std::size_t>(passes);
}

void LossReadback::queue(const Tensor& losses, const Stream& stream) {
  ADAMANT_CHECK(losses.dtype == dtype_ && losses.numel() <= max_tokens_,
                "LossReadback: {} losses of {}; it was made for up to {} of {}", losses.numel(),
                dtype_name(losses.dtype), max_tokens_, dtype_name(dtype_));
  if (queued_.size() == static_cast<std::size_t>(passes_)) fold();
  const std::size_t at = queued_.size() * max_tokens_ * dtype_size(dtype_);
  comm::copy_bytes_on_stream(static_cast<std::byte*>(host_.data()) + at, losses.data, losses.bytes(), stream);
  copied_.record(stream);
  queued_.push_back(losses.numel());
  untaken_ += 1;
}

void LossReadback::fold() {
  copied_.synchronize();
  for (std::size_t pass = 0; pass < queued_.size(); ++pass) {
    const std::size_t n = queued_[pass];
    const std::byte* values = static_cast<const std::byte*>(host_.data()) + pass * max_tokens_ * dtype_size(dtype_);
    // In order, in fp64: the reported loss does not depend on threads.
    double sum = 0;
    if (dtype_ == DType::f64) {
      for (std::size_t i = 0; i < n; ++i) sum += reinterpret_cast<const double*>(values)[i];
    } else {
      for (std::size_t i = 0; i < n; ++i) sum += reinterpret_cast<const float*>(values)[i];
    }
    folded_ += sum / static_cast<double>(n);
  }
  queued_.clear();
}

double LossReadback::take_sum_of_means() {
  fold();
  const double sum = folded_;
  folded_ = 0;
  untaken_ = 0;
  return sum;
}

}  // namespace adamant::model
