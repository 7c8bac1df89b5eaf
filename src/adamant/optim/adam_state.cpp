#include "adamant/optim/adam_state.h"

#include <cstdint>

#include "adamant/core/error.h"
#include "adamant/core/half.h"
#include "adamant/kernels/elementwise.h"
#include "adamant/optim/model_buffers.h"

namespace adamant::optim {

AdamState::AdamState(MainWeights main_weights, DType model_dtype, const UpdateRanges& ranges)
    : main_weights_(main_weights), model_dtype_(model_dtype), ranges_(ranges) {
  ADAMANT_CHECK(main_weights != MainWeights::model_weights || model_dtype == DType::f32,
                "optimizer state: {} model weights cannot be their own main weights (fp32 only)",
                dtype_name(model_dtype));
  ADAMANT_CHECK(main_weights != MainWeights::remainders || model_dtype == DType::bf16,
                "optimizer state: param remainders need bf16 model weights, not {}", dtype_name(model_dtype));
}

std::size_t AdamState::bytes() const {
  std::size_t main_bytes = 0;
  if (main_weights_ == MainWeights::fp32) main_bytes = sizeof(float);
  if (main_weights_ == MainWeights::remainders) main_bytes = sizeof(std::uint16_t);
  return (main_bytes + 2 * sizeof(float)) * ranges_.state_numel();
}

void AdamState::attach(Tensor model_weights, const Stream& stream) {
  weights_ = model_weights;
  const Device device = model_weights.device;
  const std::size_t n = ranges_.state_numel();
  if (main_weights_ == MainWeights::model_weights) {
    // In place: the state offsets must be the flat offsets, as for the one whole-model range.
    for (const UpdateRange& range : ranges_.ranges()) {
      ADAMANT_CHECK(range.state_offset == range.flat_offset,
                    "optimizer state: fp32 model weights are their own main weights only for the whole model");
    }
    main_ = weights_;
  } else {
    const DType main_dtype = main_weights_ == MainWeights::remainders ? DType::u16 : DType::f32;
    main_buffer_ = Buffer(n * dtype_size(main_dtype), device);
    main_ = Tensor::flat(main_buffer_.data(), main_dtype, device, n);
  }
  exp_avg_buffer_ = Buffer(n * sizeof(float), device);
  exp_avg_sq_buffer_ = Buffer(n * sizeof(float), device);
  exp_avg_ = Tensor::flat(exp_avg_buffer_.data(), DType::f32, device, n);
  exp_avg_sq_ = Tensor::flat(exp_avg_sq_buffer_.data(), DType::f32, device, n);
  if (main_weights_ == MainWeights::fp32) {
    for (const UpdateRange& range : ranges_.ranges()) {
      kernels::cast(weights_.slice(range.flat_offset, range.numel), main_.slice(range.state_offset, range.numel),
                    stream);
    }
  }
}

void AdamState::update(const kernels::AdamArgs& args, std::size_t range_index, const Tensor& segments,
                       const Tensor& grad, const Stream& stream, int sm_count) {
  const UpdateRange& range = ranges_[range_index];
  const Tensor main = main_.slice(range.state_offset, range.numel);
  const Tensor m = exp_avg_.slice(range.state_offset, range.numel);
  const Tensor v = exp_avg_sq_.slice(range.state_offset, range.numel);
  // Updated in place, the fp32 model weights have no separate copy to write.
  const Tensor model =
      main_weights_ == MainWeights::model_weights ? Tensor() : weights_.slice(range.flat_offset, range.numel);
  if (main_weights_ == MainWeights::remainders) {
    kernels::adam_step_remainder(args, segments, grad, main, m, v, model, stream, sm_count);
  } else {
    kernels::adam_step(args, segments, grad, main, m, v, model, stream);
  }
}

HostAdamState AdamState::download() const {
  const std::size_t n = ranges_.state_numel();
  HostAdamState host(n);
  if (main_weights_ == MainWeights::remainders) {
    // Rebuild the fp32 main weights from the bf16 model weights and the remainders.
    std::vector<bf16_bits> high(n), low(n);
    for (const UpdateRange& range : ranges_.ranges()) {
      copy_bytes(high.data() + range.state_offset, Device::cpu(), weights_.slice(range.flat_offset, range.numel).data,
                 weights_.device, range.numel * sizeof(bf16_bits));
    }
    copy_bytes(low.data(), Device::cpu(), main_.data, main_.device, n * sizeof(std::uint16_t));
    for (std::size_t i = 0; i < n; ++i) host.main[i] = join_remainder(high[i], low[i]);
  } else {
    host.main = download_fp32(main_, n);
  }
  host.exp_avg = download_fp32(exp_avg_, n);
  host.exp_avg_sq = download_fp32(exp_avg_sq_, n);
  return host;
}

void AdamState::upload(const HostAdamState& host) {
  const std::size_t n = ranges_.state_numel();
  upload_fp32(host.exp_avg, exp_avg_);
  upload_fp32(host.exp_avg_sq, exp_avg_sq_);
  if (main_weights_ == MainWeights::model_weights) {
    upload_fp32(host.main, main_);  // the model weights themselves
    return;
  }
  std::vector<std::uint8_t> model(n * dtype_size(model_dtype_));
  round_main_to_model(host.main.data(), model.data(), model_dtype_, n);
  if (main_weights_ == MainWeights::remainders) {
    std::vector<std::uint16_t> low(n);
    const auto* high = reinterpret_cast<const bf16_bits*>(model.data());
    for (std::size_t i = 0; i < n; ++i) low[i] = remainder_of(host.main[i], high[i]);
    copy_bytes(main_.data, main_.device, low.data(), Device::cpu(), n * sizeof(std::uint16_t));
  } else {
    upload_fp32(host.main, main_);
  }
  const std::size_t model_element = dtype_size(model_dtype_);
  for (const UpdateRange& range : ranges_.ranges()) {
    copy_bytes(weights_.slice(range.flat_offset, range.numel).data, weights_.device,
               model.data() + range.state_offset * model_element, Device::cpu(), range.numel * model_element);
  }
}

}  // namespace adamant::optim
