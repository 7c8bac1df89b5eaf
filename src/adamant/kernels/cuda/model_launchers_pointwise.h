#pragma once
// Shared by the *.cu files of the layernorm, GELU, residual add, dropout and embedding
// kernels. The launchers of GELU, residual add, dropout and the embeddings are
// declared in their public headers (kernels/gelu_launchers.h, kernels/dropout.h, ...),
// whose dispatchers call them; layernorm's raw-pointer launchers are declared here for layernorm_cuda.cpp,
// which keeps their workspace.
//
// Storage: bf16 tensors are passed as their 16-bit patterns (std::uint16_t);
// every computation is done in fp32. `vectorized` says that every operand the
// kernel reads or writes with 16-byte accesses is 16-byte aligned; the kernels
// then use 8-element bf16 vectors where the shape allows and scalar accesses
// elsewhere.
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda_launch.h"

namespace adamant::kernels::cuda::launchers {

using PointwiseLaunch = CudaLaunch;

inline cudaStream_t stream_of(const CudaLaunch& launch) { return static_cast<cudaStream_t>(launch.stream); }

// ---- layernorm (layernorm.cu, layernorm_backward.cu) ----

cudaError_t layernorm_forward(const std::uint16_t* x, const std::uint16_t* weight, const std::uint16_t* bias,
                              float epsilon, std::uint16_t* out, float* mean, float* rstd, std::int64_t rows,
                              std::int64_t cols, const PointwiseLaunch& launch);

// The fp32 workspace layernorm_backward needs for any shape of at most rows x cols:
// per-chunk column partial sums of d_weight, d_bias and a branch's d_bias. The chunking
// depends on the shape only, so the summation order (and the result) is the same on
// every run.
std::int64_t layernorm_backward_workspace_floats(std::int64_t rows, std::int64_t cols);

// The gradient of the residual branch below a layernorm (kernels/residual_layernorm.h),
// made from d_x as the backward writes it. With dropout.probability > 0, d_branch =
// dropout(d_x) (rows inside samples of rows_per_sample rows, the first at
// dropout.first_element); with d_bias, the column sums of the branch's gradient as stored
// (d_branch, or d_x without dropout). Rows of 16-byte vectors only.
struct LayernormBranchGrad {
  std::uint16_t* d_branch = nullptr;
  float* d_bias = nullptr;
  DropoutParams dropout;
  std::int64_t rows_per_sample = 0;

  bool dropped() const { return dropout.probability > 0.0f; }
  bool wanted() const { return dropped() || d_bias != nullptr; }
};

// d_x += the layernorm's input gradient; d_weight and d_bias overwritten; with `branch`,
// the branch's gradient too.
cudaError_t layernorm_backward(const std::uint16_t* d_out, const std::uint16_t* x, const std::uint16_t* weight,
                               const float* mean, const float* rstd, std::uint16_t* d_x, float* d_weight, float* d_bias,
                               float* workspace, std::int64_t rows, std::int64_t cols, const PointwiseLaunch& launch,
                               const LayernormBranchGrad& branch = {});

}  // namespace adamant::kernels::cuda::launchers
