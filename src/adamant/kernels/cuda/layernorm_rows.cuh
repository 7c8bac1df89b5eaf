#pragma once
// What the layernorm forward (layernorm.cu) and backward (layernorm_backward.cu) kernels
// share: the warp-per-row block shape and its grid, when rows take 16-byte vectors, and
// the hidden dropout of one such vector. Only for *.cu files.
#include <cstdint>

#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/pointwise_model_philox.cuh"

namespace adamant::kernels::cuda::launchers::layernorm_rows {

// The element-wise helpers both files use (`using namespace layernorm_rows` brings them in).
using pointwise_detail::first_sample_of;
using pointwise_detail::kVectorWidth;
using pointwise_detail::kWarp;
using pointwise_detail::load_bf16;
using pointwise_detail::store_bf16;
using pointwise_detail::store_packed_bf16;
using pointwise_detail::unpack_bf16;
using pointwise_detail::warp_sum;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
// The row kernels' launch bounds hold them to the registers that let this many blocks stay
// resident, so a grid capped at this many blocks a multiprocessor runs in one wave.
constexpr int kBlocksPerMultiprocessor = 6;

inline int row_grid(std::int64_t rows, const PointwiseLaunch& launch,
                    int blocks_per_multiprocessor = kBlocksPerMultiprocessor) {
  return pointwise_detail::capped_grid(rows, kWarpsPerBlock, launch.multiprocessors, blocks_per_multiprocessor);
}

inline bool use_vectors(std::int64_t cols, const PointwiseLaunch& launch) {
  return launch.vectorized && cols % kVectorWidth == 0;
}

// dropout() of 8 values of one sample from its element 4 * first_group on (two Philox
// groups), in place.
__device__ __forceinline__ void drop_vector(const DropoutParams& params, std::uint64_t sample,
                                            std::uint64_t first_group, float (&v)[kVectorWidth]) {
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const PhiloxWords bits = pointwise_detail::dropout_bits(params.seed, sample, params.site, first_group + g);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[4 * g + k] = pointwise_detail::dropout_value(v[4 * g + k], bits.word[k], params.probability, params.keep_scale);
    }
  }
}

}  // namespace adamant::kernels::cuda::launchers::layernorm_rows
