#pragma once
// Host-side checks and conversions shared by the CUDA attention entry points
// (attention_cuda.cpp, flash_attention_cuda.cpp): operand and shape checks, the
// dropout arguments in launch form, launch errors as adamant::Error. Only for
// files compiled by the host compiler (*_cuda.cpp).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "adamant/core/tensor.h"
#include "adamant/kernels/attention.h"
#include "adamant/kernels/cuda/attention_launchers.h"
#include "adamant/kernels/dropout.h"

namespace adamant::kernels::cuda::attention_operands {

// Checks one operand: its dtype, on `device`, `numel` elements (exactly, or at least
// with `at_least`), aligned to `alignment` bytes for the kernels' vector accesses.
void check_operand(const char* op, const char* name, const Tensor& t, DType dtype, Device device, std::int64_t numel,
                   std::size_t alignment, bool at_least = false);
// Batch, heads and head_dim within what the kernels launch; each kernel family
// passes the head sizes it is instantiated for (its launchers' kSupportedHeadDims).
void check_shape(const char* op, const AttentionShape& shape, std::span<const std::int64_t> supported_head_dims);
attention_launchers::Problem problem_of(const AttentionShape& shape);
// The dropout arguments in launch form, after range checks; the same for every
// attention kernel, so all of them drop exactly the CPU's elements.
attention_launchers::Dropout dropout_of(const char* op, const DropoutArgs& args, std::int64_t batch);
void check_launch(cudaError_t status, const char* op, const AttentionShape& shape);

inline const std::uint16_t* bits_of(const Tensor& t) { return static_cast<const std::uint16_t*>(t.data); }
inline std::uint16_t* mutable_bits_of(const Tensor& t) { return static_cast<std::uint16_t*>(t.data); }

}  // namespace adamant::kernels::cuda::attention_operands
