#pragma once
// The GELU launchers (kernels/cuda/pointwise_model.cu) that gelu.h's dispatchers call, on
// bf16 bit patterns: the exact form or (tanh_form) the tanh one; each returns its
// cudaError_t. Plain C++ without the library's headers, so that CUDA sources (the
// benchmarks) call them as the dispatchers do.
#include <cstdint>

#include "adamant/kernels/cuda_launch.h"

namespace adamant::kernels::cuda {

int gelu_forward(const std::uint16_t* x, std::uint16_t* out, std::int64_t n, bool tanh_form, const CudaLaunch& launch);
// d_x = d_out * gelu'(x); with `out` also gelu(x) into out (selective recomputation), and with
// column_sums.sums the column sums of d_x (a bias gradient).
int gelu_backward(const std::uint16_t* d_out, const std::uint16_t* x, std::uint16_t* d_x, std::uint16_t* out,
                  std::int64_t n, bool tanh_form, const CudaLaunch& launch, const ColumnSumsOut& column_sums);

}  // namespace adamant::kernels::cuda
