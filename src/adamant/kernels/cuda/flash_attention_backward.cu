// Causal flash attention backward (kernels/flash_attention.h), FlashAttention-2's
// deterministic scheme without atomics (flash_attention_backward_passes.h): the row
// statistics here, then the key pass (dk, dv) and the query pass (dq).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "adamant/kernels/cuda/flash_attention_backward_passes.h"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_stages.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

constexpr int kStatisticsThreads = 256;

// Per (token, head) row: D = sum_d d_out_d o_d, logsumexp * log2(e) and D (1 - p) (D
// over the attention dropout's 1/(1-p); D without dropout), into the row's statistics slot. Each thread takes one
// 16-byte chunk of kPasses rows (adjacent threads, adjacent chunks, so the loads coalesce, and all of a thread's loads
// are in flight at once); a row's chunks are then summed in order.
template <int kHeadDim>
struct StatisticsConfig {
  static constexpr int kChunksPerRow = kHeadDim / kChunk;
  static constexpr int kRowsPerPass = kStatisticsThreads / kChunksPerRow;
  static constexpr int kPasses = 4;
  static constexpr int kRowsPerBlock = kPasses * kRowsPerPass;
};

template <int kHeadDim>
__global__ void __launch_bounds__(kStatisticsThreads)
    flash_backward_statistics_kernel(BackwardOperands operands, Problem problem, float inverse_keep_scale) {
  using Config = StatisticsConfig<kHeadDim>;
  constexpr int kChunksPerRow = Config::kChunksPerRow;
  // One padding float per row keeps both the chunk writes and the row sums free of bank conflicts.
  __shared__ float partial[Config::kRowsPerBlock * (kChunksPerRow + 1)];
  const std::int64_t rows = static_cast<std::int64_t>(problem.batch) * problem.seq * problem.heads;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.x) * Config::kRowsPerBlock;
  const int t = static_cast<int>(threadIdx.x);
  const int r = t / kChunksPerRow;
  const int c = t % kChunksPerRow;
  uint4 o[Config::kPasses];
  uint4 d_o[Config::kPasses];
#pragma unroll
  for (int pass = 0; pass < Config::kPasses; ++pass) {
    const std::int64_t row = first_row + pass * Config::kRowsPerPass + r;
    o[pass] = d_o[pass] = make_uint4(0, 0, 0, 0);
    if (r < Config::kRowsPerPass && row < rows) {
      // out and d_out are [token, head, head_dim]: row (token, head) starts at row * head_dim.
      const std::int64_t offset = row * kHeadDim + c * kChunk;
      o[pass] = __ldg(reinterpret_cast<const uint4*>(operands.out + offset));
      d_o[pass] = __ldg(reinterpret_cast<const uint4*>(operands.d_out + offset));
    }
  }
#pragma unroll
  for (int pass = 0; pass < Config::kPasses; ++pass) {
    const std::uint32_t o_words[4] = {o[pass].x, o[pass].y, o[pass].z, o[pass].w};
    const std::uint32_t d_o_words[4] = {d_o[pass].x, d_o[pass].y, d_o[pass].z, d_o[pass].w};
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      sum = fmaf(__uint_as_float(o_words[w] << 16), __uint_as_float(d_o_words[w] << 16), sum);
      sum = fmaf(__uint_as_float(o_words[w] & 0xffff0000u), __uint_as_float(d_o_words[w] & 0xffff0000u), sum);
    }
    if (r < Config::kRowsPerPass) partial[(pass * Config::kRowsPerPass + r) * (kChunksPerRow + 1) + c] = sum;
  }
  __syncthreads();
  if (t >= Config::kRowsPerBlock || first_row + t >= rows) return;
  float total = 0.0f;
#pragma unroll
  for (int chunk = 0; chunk < kChunksPerRow; ++chunk) total += partial[t * (kChunksPerRow + 1) + chunk];
  const std::int64_t row = first_row + t;
  const std::int64_t token = row / problem.heads;
  const int head = static_cast<int>(row % problem.heads);
  const std::int64_t sample = token / problem.seq;
  const std::int64_t position = token % problem.seq;
  const float lse = operands.logsumexp[(sample * problem.heads + head) * problem.seq + position];
  *reinterpret_cast<float4*>(row_statistics_slot(
      operands.d_qkv, token, 3 * static_cast<std::int64_t>(problem.heads) * kHeadDim, head, kHeadDim)) =
      make_float4(total, lse * kLog2E, total * inverse_keep_scale, 0.0f);
}

template <int kHeadDim>
cudaError_t launch_statistics(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                              cudaStream_t stream) {
  constexpr int kRowsPerBlock = StatisticsConfig<kHeadDim>::kRowsPerBlock;
  const std::int64_t rows = static_cast<std::int64_t>(problem.batch) * problem.seq * problem.heads;
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  flash_backward_statistics_kernel<kHeadDim><<<static_cast<unsigned>(blocks), kStatisticsThreads, 0, stream>>>(
      operands, problem, dropout.enabled ? 1.0f / dropout.keep_scale : 1.0f);
  return cudaGetLastError();
}

}  // namespace

cudaError_t encode_backward_maps(BackwardMaps& maps, const BackwardOperands& operands, const Problem& problem) {
  cudaError_t status = flash_detail::encode_qkv_map(maps.qkv, operands.qkv, problem);
  if (status != cudaSuccess) return status;
  status = flash_detail::encode_head_rows_map(maps.d_out, operands.d_out, problem);
  if (status != cudaSuccess) return status;
  const std::int64_t qkv_floats = 3 * static_cast<std::int64_t>(problem.heads) * problem.head_dim / 2;
  return detail::encode_fp32_rows_map(maps.statistics, operands.d_qkv, qkv_floats, qkv_floats, problem.seq,
                                      problem.batch, kStatisticsRow, flash_detail::kStreamRows);
}

cudaError_t flash_attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                     cudaStream_t stream) {
  if (problem.batch == 0 || problem.seq == 0) return cudaSuccess;
  if (static_cast<std::int64_t>(problem.batch) * problem.heads > INT_MAX) return cudaErrorInvalidConfiguration;
  cudaError_t status = cudaErrorInvalidValue;
  switch (problem.head_dim) {
    case 64:
      status = launch_statistics<64>(operands, problem, dropout, stream);
      break;
    case 80:
      status = launch_statistics<80>(operands, problem, dropout, stream);
      break;
    case 96:
      status = launch_statistics<96>(operands, problem, dropout, stream);
      break;
    case 128:
      status = launch_statistics<128>(operands, problem, dropout, stream);
      break;
    default:
      break;
  }
  if (status != cudaSuccess) return status;
  BackwardMaps maps;
  status = encode_backward_maps(maps, operands, problem);
  if (status != cudaSuccess) return status;
  if (operands.d_scores == nullptr) {
    status = launch_backward_key_pass(maps, operands, problem, dropout, stream);
    if (status != cudaSuccess) return status;
    return launch_backward_query_pass(maps, operands, problem, dropout, stream);
  }
  // A scratch that holds fewer slots than there are takes them in groups of as even a
  // size as the scratch allows, so that every group's launches end with the same tail.
  if (operands.score_slots < 1) return cudaErrorInvalidValue;
  const int slots = problem.batch * problem.heads;
  const int groups = (slots + operands.score_slots - 1) / operands.score_slots;
  const int group_slots = (slots + groups - 1) / groups;
  for (int first = 0; first < slots; first += group_slots) {
    Problem group = problem;
    group.first_slot = first;
    group.slot_count = std::min(group_slots, slots - first);
    status = launch_backward_key_pass(maps, operands, group, dropout, stream);
    if (status != cudaSuccess) return status;
    status = launch_backward_stored_query_pass(maps, operands, group, dropout, stream);
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
