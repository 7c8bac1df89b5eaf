// Fused multi-tensor Adam over one flat shard (kernels/adam.h), in one launch.
//
// The shard is cut into tiles of kTile elements handed to a persistent grid.
// A block finds the first segment touching its tile in the (begin, end, decay)
// table, starting from its previous tile's (one cached load inside a large
// segment, a binary search otherwise), and walks the segments that overlap the tile; within
// each overlap every thread updates kUnroll groups of 4 elements, issuing all its
// loads before the arithmetic so that many 16-byte accesses are in flight.
// Groups cut by a segment edge (unaligned starts, padding gaps) fall back to
// per-lane accesses. The arithmetic uses explicit round-to-nearest intrinsics
// (no fused multiply-add, IEEE division and square root) in the order of the CPU
// reference, so both produce the same fp32 bits.
#include <cstdint>

#include "adamant/kernels/cuda/adam_update.cuh"
#include "adamant/kernels/cuda/device_common.cuh"
#include "adamant/kernels/cuda/launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

using detail::kLanes;

constexpr int kThreads = 256;
// Groups of 4 elements each thread has in flight per tile. On an H200, 2 groups
// with 4 blocks per multiprocessor beat 4 groups with 2 blocks by 15-40% for bf16
// gradients and remainders (BENCHMARKS.md). The compile-time override lets the
// benchmark compare depths without touching the code.
#ifndef ADAMANT_ADAM_UNROLL
#define ADAMANT_ADAM_UNROLL 2
#endif
constexpr int kUnroll = ADAMANT_ADAM_UNROLL;
// Caps registers so that 2048 / kUnroll threads fit on a multiprocessor (at most 32 bytes spilled).
constexpr int kMinBlocksPerMultiprocessor = 8 / kUnroll;
constexpr std::int64_t kTile = static_cast<std::int64_t>(kThreads) * kUnroll * kLanes;

// Updates the elements [begin, end) of the tile starting at tile_begin.
template <DType kGrad, ModelCopy kModel, bool kRemainder, bool kVectorized>
__device__ __forceinline__ void update_range(const AdamOperands& ops, const AdamConstants& c, std::int64_t tile_begin,
                                             std::int64_t begin, std::int64_t end, bool decay) {
  using GradStorage = detail::Storage<kGrad>;
  const auto* grad = static_cast<const GradStorage*>(ops.grad);
  auto* model_bits = static_cast<std::uint16_t*>(ops.model_param);

  std::int64_t first[kUnroll];
  bool active[kUnroll];
  float param[kUnroll][kLanes] = {};
  float exp_avg[kUnroll][kLanes] = {};
  float exp_avg_sq[kUnroll][kLanes] = {};
  GradStorage grad_in[kUnroll][kLanes] = {};
  std::uint16_t high[kUnroll][kLanes] = {};
  std::uint16_t low[kUnroll][kLanes] = {};

#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    first[k] = tile_begin + static_cast<std::int64_t>(k * kThreads + static_cast<int>(threadIdx.x)) * kLanes;
    active[k] = first[k] < end && first[k] + kLanes > begin;
    if (!active[k]) continue;
    detail::load_group<kVectorized>(grad, first[k], begin, end, grad_in[k]);
    detail::load_group<kVectorized>(static_cast<const float*>(ops.exp_avg), first[k], begin, end, exp_avg[k]);
    detail::load_group<kVectorized>(static_cast<const float*>(ops.exp_avg_sq), first[k], begin, end, exp_avg_sq[k]);
    if constexpr (kRemainder) {
      detail::load_group<kVectorized>(static_cast<const std::uint16_t*>(model_bits), first[k], begin, end, high[k]);
      detail::load_group<kVectorized>(static_cast<const std::uint16_t*>(ops.remainder), first[k], begin, end, low[k]);
    } else {
      detail::load_group<kVectorized>(static_cast<const float*>(ops.main_param), first[k], begin, end, param[k]);
    }
  }

#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    if (!active[k]) continue;
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane) {
      if constexpr (kRemainder) param[k][lane] = detail::join_remainder_bits(high[k][lane], low[k][lane]);
      const float p = adam_update(param[k][lane], detail::to_f32<kGrad>(grad_in[k][lane]), exp_avg[k][lane],
                                  exp_avg_sq[k][lane], decay, c);
      param[k][lane] = p;
      if constexpr (kRemainder) {
        detail::split_remainder_bits(p, high[k][lane], low[k][lane]);
      } else if constexpr (kModel == ModelCopy::bf16) {
        high[k][lane] = detail::bf16_bits_for_remainder(p);
      } else if constexpr (kModel == ModelCopy::f16) {
        high[k][lane] = detail::from_f32<DType::f16>(p);
      }
    }
    detail::store_group<kVectorized>(ops.exp_avg, first[k], begin, end, exp_avg[k]);
    detail::store_group<kVectorized>(ops.exp_avg_sq, first[k], begin, end, exp_avg_sq[k]);
    if constexpr (kRemainder) {
      detail::store_group<kVectorized>(ops.remainder, first[k], begin, end, low[k]);
    } else {
      detail::store_group<kVectorized>(ops.main_param, first[k], begin, end, param[k]);
    }
    if constexpr (kModel == ModelCopy::bf16 || kModel == ModelCopy::f16) {
      detail::store_group<kVectorized>(model_bits, first[k], begin, end, high[k]);
    } else if constexpr (kModel == ModelCopy::f32) {
      detail::store_group<kVectorized>(static_cast<float*>(ops.model_param), first[k], begin, end, param[k]);
    }
  }
}

template <DType kGrad, ModelCopy kModel, bool kRemainder, bool kVectorized>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerMultiprocessor)
    adam_kernel(AdamOperands ops, AdamConstants c) {
  if (!take_step_factor(c)) return;
  const std::int64_t num_tiles = (ops.numel + kTile - 1) / kTile;
  int first_segment = 0;
  for (std::int64_t tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    const std::int64_t tile_begin = tile * kTile;
    const std::int64_t tile_end = tile_begin + kTile < ops.numel ? tile_begin + kTile : ops.numel;
    first_segment = detail::next_segment_ending_after(ops.segments, ops.num_segments, first_segment, tile_begin);
    for (int s = first_segment; s < ops.num_segments; ++s) {
      const std::int64_t segment_begin = __ldg(ops.segments + 3 * s);
      if (segment_begin >= tile_end) break;
      const std::int64_t segment_end = __ldg(ops.segments + 3 * s + 1);
      const bool decay = __ldg(ops.segments + 3 * s + 2) != 0;
      update_range<kGrad, kModel, kRemainder, kVectorized>(ops, c, tile_begin, max(segment_begin, tile_begin),
                                                           min(segment_end, tile_end), decay);
    }
  }
}

template <DType kGrad, ModelCopy kModel, bool kRemainder>
cudaError_t launch(const AdamOperands& ops, const AdamConstants& c, LaunchShape shape, cudaStream_t stream) {
  if (ops.numel == 0 || ops.num_segments == 0) return cudaSuccess;
  const std::int64_t num_tiles = (ops.numel + kTile - 1) / kTile;
  auto* kernel =
      shape.vectorized ? adam_kernel<kGrad, kModel, kRemainder, true> : adam_kernel<kGrad, kModel, kRemainder, false>;
  const int grid = detail::resident_grid_size(kernel, kThreads, shape.multiprocessors, num_tiles);
  kernel<<<grid, kThreads, 0, stream>>>(ops, c);
  return cudaGetLastError();
}

template <ModelCopy kModel, bool kRemainder>
cudaError_t launch_for_grad(DType grad_dtype, const AdamOperands& ops, const AdamConstants& c, LaunchShape shape,
                            cudaStream_t stream) {
  switch (grad_dtype) {
    case DType::f32:
      return launch<DType::f32, kModel, kRemainder>(ops, c, shape, stream);
    case DType::bf16:
      return launch<DType::bf16, kModel, kRemainder>(ops, c, shape, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

__global__ void resolve_step_factor_kernel(const double* squared_norm, StepFactorInputs inputs, float* factor) {
  const StepFactor resolved = step_factor_of(*squared_norm, inputs);
  factor[0] = resolved.adam_grad_scale;
  factor[1] = resolved.finite ? 0.0f : 1.0f;
}

}  // namespace

cudaError_t resolve_step_factor(const double* squared_norm, const StepFactorInputs& inputs, float* factor,
                                cudaStream_t stream) {
  resolve_step_factor_kernel<<<1, 1, 0, stream>>>(squared_norm, inputs, factor);
  return cudaGetLastError();
}

cudaError_t adam(const AdamOperands& operands, DType grad_dtype, ModelCopy model, bool remainder,
                 const AdamConstants& constants, LaunchShape shape, cudaStream_t stream) {
  if (remainder) {
    if (model != ModelCopy::bf16) return cudaErrorInvalidValue;
    return launch_for_grad<ModelCopy::bf16, true>(grad_dtype, operands, constants, shape, stream);
  }
  switch (model) {
    case ModelCopy::none:
      return launch_for_grad<ModelCopy::none, false>(grad_dtype, operands, constants, shape, stream);
    case ModelCopy::bf16:
      return launch_for_grad<ModelCopy::bf16, false>(grad_dtype, operands, constants, shape, stream);
    case ModelCopy::f16:
      return launch_for_grad<ModelCopy::f16, false>(grad_dtype, operands, constants, shape, stream);
    case ModelCopy::f32:
      return launch_for_grad<ModelCopy::f32, false>(grad_dtype, operands, constants, shape, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace adamant::kernels::cuda::launchers
