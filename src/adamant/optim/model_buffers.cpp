#include "adamant/optim/model_buffers.h"

#include <cstring>

#include "adamant/core/error.h"
#include "adamant/core/half.h"

namespace adamant::optim {

void check_model_buffers(const Tensor& weights, const Tensor& grads, std::size_t padded_numel, DType model_dtype,
                         Device device, bool bf16_grads) {
  ADAMANT_CHECK(weights.data != nullptr && grads.data != nullptr, "optimizer attach: empty weight or grad buffer");
  ADAMANT_CHECK(weights.numel() == padded_numel && grads.numel() == padded_numel,
                "optimizer attach: the model's flat buffers hold {} weights and {} grads; the optimizer needs {} "
                "(allocate Optimizer::padded_numel() elements)",
                weights.numel(), grads.numel(), padded_numel);
  ADAMANT_CHECK(weights.dtype == model_dtype,
                "optimizer attach: model weights are {} but the optimizer was built for {}", dtype_name(weights.dtype),
                dtype_name(model_dtype));
  ADAMANT_CHECK(
      grads.dtype == DType::f32 || (bf16_grads && grads.dtype == DType::bf16),
      "optimizer attach: gradients must be fp32{}, not {}",
      bf16_grads ? " or bf16" : " (bf16 takes model.optim.name: distributed_fused_adam with grad_sync_dtype: bf16)",
      dtype_name(grads.dtype));
  ADAMANT_CHECK(weights.device == device && grads.device == device,
                "optimizer attach: buffers on {} and {} but the data-parallel communicator works on {}",
                weights.device.str(), grads.device.str(), device.str());
}

void round_main_to_model(const float* main, void* model, DType model_dtype, std::size_t count) {
  switch (model_dtype) {
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i) static_cast<bf16_bits*>(model)[i] = bf16_round_for_remainder(main[i]);
      break;
    case DType::f16:
      for (std::size_t i = 0; i < count; ++i) static_cast<f16_bits*>(model)[i] = f32_to_f16(main[i]);
      break;
    case DType::f32:
      std::memcpy(model, main, count * sizeof(float));
      break;
    default:
      fail("model weights of {} are not supported (fp32, bf16 or fp16)", dtype_name(model_dtype));
  }
}

std::vector<float> download_fp32(const Tensor& state, std::size_t count) {
  ADAMANT_CHECK(state.dtype == DType::f32 && count <= state.numel(), "download_fp32: {} elements of a {} tensor of {}",
                count, dtype_name(state.dtype), state.numel());
  std::vector<float> host(count);
  copy_bytes(host.data(), Device::cpu(), state.data, state.device, count * sizeof(float));
  return host;
}

void upload_fp32(const std::vector<float>& host, Tensor state) {
  ADAMANT_CHECK(state.dtype == DType::f32 && host.size() <= state.numel(),
                "upload_fp32: {} elements into a {} tensor of {}", host.size(), dtype_name(state.dtype), state.numel());
  copy_bytes(state.data, state.device, host.data(), Device::cpu(), host.size() * sizeof(float));
}

}  // namespace adamant::optim
