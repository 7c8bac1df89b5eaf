// Causal flash attention backward (kernels/flash_attention.h), FlashAttention-2's
// deterministic scheme without atomics (flash_attention_backward_passes.h): the query pass
// (dq, and the row statistics) and then the key pass (dk, dv); or, with a score scratch, the
// row statistics here, the key pass and the query pass from the stored score gradients.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "adamant/kernels/cuda/column_sums.h"
#include "adamant/kernels/cuda/flash_attention_backward_passes.h"
#include "adamant/kernels/cuda/flash_attention_dispatch.cuh"
#include "adamant/kernels/cuda/flash_attention_launchers.h"
#include "adamant/kernels/cuda/flash_attention_stages.cuh"
#include "adamant/kernels/cuda/flash_attention_tiles.cuh"

namespace adamant::kernels::cuda::flash_attention_launchers {

namespace {

using namespace flash_detail;  // NOLINT(build/namespaces): the kernels' own helpers

constexpr int kStatisticsThreads = 256;

// Per (token, head) row, its record in the statistics (statistics_record): D = sum_d d_out_d o_d,
// logsumexp * log2(e) and D (1 - p). Each thread takes one 16-byte chunk of kPasses rows (adjacent
// threads, adjacent chunks, so the loads coalesce, and all of a thread's loads are in flight at
// once); a row's chunks are then summed in order (chunk_dot).
template <int kHeadDim>
struct StatisticsConfig {
  static constexpr int kChunksPerRow = kHeadDim / kChunk;
  static constexpr int kRowsPerPass = kStatisticsThreads / kChunksPerRow;
  static constexpr int kPasses = 4;
  static constexpr int kRowsPerBlock = kPasses * kRowsPerPass;
};

template <int kHeadDim>
__global__ void __launch_bounds__(kStatisticsThreads)
    flash_backward_statistics_kernel(BackwardOperands operands, Problem problem, float inverse_keep) {
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
    const float sum = chunk_dot(o[pass], d_o[pass]);
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
  // The statistics are [token, head] records, so a row's is the row's index.
  reinterpret_cast<float4*>(operands.statistics)[row] = statistics_record(total, lse, inverse_keep);
}

template <int kHeadDim>
cudaError_t launch_statistics(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                              cudaStream_t stream) {
  constexpr int kRowsPerBlock = StatisticsConfig<kHeadDim>::kRowsPerBlock;
  const std::int64_t rows = static_cast<std::int64_t>(problem.batch) * problem.seq * problem.heads;
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
  flash_backward_statistics_kernel<kHeadDim><<<static_cast<unsigned>(blocks), kStatisticsThreads, 0, stream>>>(
      operands, problem, inverse_keep_scale(dropout));
  return cudaGetLastError();
}

// The passes (flash_attention_backward_passes.h) in their order for `operands`.
cudaError_t run_backward_passes(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                cudaStream_t stream) {
  BackwardMaps maps;
  cudaError_t status = encode_backward_maps(maps, operands, problem);
  if (status != cudaSuccess) return status;
  if (operands.d_scores == nullptr) {
    // The query pass makes its rows' statistics as it starts and leaves them for the key pass.
    status = launch_backward_query_pass(maps, operands, problem, dropout, stream);
    if (status != cudaSuccess) return status;
    return launch_backward_key_pass(maps, operands, problem, dropout, stream);
  }
  // The key pass runs first, to store the score gradients: the statistics come before it.
  status = cudaErrorInvalidValue;
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

}  // namespace

cudaError_t encode_backward_maps(BackwardMaps& maps, const BackwardOperands& operands, const Problem& problem) {
  cudaError_t status = flash_detail::encode_qkv_map(maps.qkv, operands.qkv, problem);
  if (status != cudaSuccess) return status;
  status = flash_detail::encode_head_rows_map(maps.d_out, operands.d_out, problem);
  if (status != cudaSuccess) return status;
  const std::int64_t token_floats = static_cast<std::int64_t>(problem.heads) * kStatisticsRow;
  return detail::encode_fp32_rows_map(maps.statistics, operands.statistics, token_floats, token_floats, problem.seq,
                                      problem.batch, kStatisticsRow, flash_detail::kStreamRows);
}

cudaError_t flash_attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                     cudaStream_t stream, const ColumnSumsOut& bias) {
  if (problem.batch == 0 || problem.seq == 0) return cudaSuccess;
  if (static_cast<std::int64_t>(problem.batch) * problem.heads > INT_MAX) return cudaErrorInvalidConfiguration;
  if (bias.sums == nullptr) return run_backward_passes(operands, problem, dropout, stream);
  // The passes' warps leave their rows' column sums in the scratch, a few MiB where d_qkv
  // is tens to hundreds (a sixteenth of its rows, in fp32), so that the bias gradient does
  // not read d_qkv again; the rest of the scratch takes column_sums' own partial sums.
  const std::int64_t columns = 3 * static_cast<std::int64_t>(problem.heads) * problem.head_dim;
  const std::int64_t partial_floats = bias_partials_floats(problem);
  BackwardOperands summing = operands;
  if (partial_floats <= bias.scratch_floats) summing.bias_partials = bias.scratch;
  const cudaError_t status = run_backward_passes(summing, problem, dropout, stream);
  if (status != cudaSuccess) return status;
  if (summing.bias_partials == nullptr) {
    return launchers::column_sums(operands.d_qkv, DType::bf16, static_cast<std::int64_t>(problem.batch) * problem.seq,
                                  columns, bias.scratch, bias.scratch_floats, bias.sums, stream);
  }
  return launchers::column_sums(summing.bias_partials, DType::f32, partial_floats / columns, columns,
                                bias.scratch + partial_floats, bias.scratch_floats - partial_floats, bias.sums, stream);
}

}  // namespace adamant::kernels::cuda::flash_attention_launchers
