#pragma once
// Checks on the flat model buffers handed to Optimizer::attach, shared by both optimizers.
#include <cstddef>
#include <vector>

#include "adamant/core/device.h"
#include "adamant/core/dtype.h"
#include "adamant/core/tensor.h"

namespace adamant::optim {

// weights: padded_numel elements of model_dtype; grads: padded_numel fp32, or bf16 where the
// optimizer syncs bf16 gradients (`bf16_grads`: distributed_fused_adam, grad_sync_dtype bf16);
// both on `device`.
void check_model_buffers(const Tensor& weights, const Tensor& grads, std::size_t padded_numel, DType model_dtype,
                         Device device, bool bf16_grads);

// The model-dtype value the optimizer writes for main weight `main` (the rounding of adam.h).
void round_main_to_model(const float* main, void* model, DType model_dtype, std::size_t count);

// The first `count` fp32 elements of optimizer state (host or device) as a host vector,
// and back: checkpoints stage state through the host.
std::vector<float> download_fp32(const Tensor& state, std::size_t count);
void upload_fp32(const std::vector<float>& host, Tensor state);

}  // namespace adamant::optim
