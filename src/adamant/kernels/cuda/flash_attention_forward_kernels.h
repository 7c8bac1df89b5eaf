#pragma once
// The forward's wgmma kernel (flash_attention_forward_wgmma.cu, head sizes 64 and 128),
// launched by flash_attention_forward (flash_attention_forward.cu), which runs the
// mma.sync kernel for the other head sizes.
#include <cuda_runtime.h>

#include "adamant/kernels/cuda/flash_attention_launchers.h"

namespace adamant::kernels::cuda::flash_attention_launchers {

cudaError_t launch_forward_wgmma(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                 cudaStream_t stream);

}  // namespace adamant::kernels::cuda::flash_attention_launchers
