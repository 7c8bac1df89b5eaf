// The stable radix sort of stable_key_sort.h. Each pass over an 8-bit digit:
// 1. counts: every tile of kSortTile items counts its digits (shared-memory integer atomics);
// 2. offsets: one block turns the counts, laid out digit-major ([digit, tile]), into an
//    exclusive prefix sum: where each (digit, tile) starts in the output;
// 3. scatter: every item goes to its (digit, tile) start plus the number of items of its
//    digit before it in the tile (earlier warps' counts plus a warp match).
// A pass is stable, so the sort by all digits, least significant first, is.
#include "adamant/kernels/cuda/stable_key_sort.h"
#include "adamant/kernels/embedding_scratch.h"

namespace adamant::kernels::cuda::sort_detail {

namespace {

constexpr int kTile = static_cast<int>(embedding_scratch::kSortTile);
constexpr int kDigits = static_cast<int>(embedding_scratch::kDigits);
constexpr int kWarps = kTile / 32;
constexpr int kScanThreads = 1024;

__device__ __forceinline__ unsigned digit_of(std::uint32_t key, int shift) { return (key >> shift) & 0xffu; }

__global__ void __launch_bounds__(kTile)
    count_digits_kernel(const std::uint32_t* keys, std::int64_t n, int shift, std::uint32_t* counts, int tiles) {
  __shared__ std::uint32_t tile_counts[kDigits];
  tile_counts[threadIdx.x] = 0;
  __syncthreads();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  if (i < n) atomicAdd(&tile_counts[digit_of(keys[i], shift)], 1u);
  __syncthreads();
  counts[static_cast<std::int64_t>(threadIdx.x) * tiles + blockIdx.x] = tile_counts[threadIdx.x];
}

// One block: counts (digit-major) become their exclusive prefix sums, 1024 at a time.
__global__ void __launch_bounds__(kScanThreads) prefix_counts_kernel(std::uint32_t* counts, std::int64_t total) {
  __shared__ std::uint32_t warp_sums[kScanThreads / 32];
  __shared__ std::uint32_t carry;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (std::int64_t base = 0; base < total; base += kScanThreads) {
    const std::int64_t i = base + threadIdx.x;
    const std::uint32_t value = i < total ? counts[i] : 0u;
    std::uint32_t inclusive = value;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const std::uint32_t below = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += below;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    std::uint32_t before = carry;
    for (int w = 0; w < warp; ++w) before += warp_sums[w];
    if (i < total) counts[i] = before + inclusive - value;
    __syncthreads();  // every thread has read carry and warp_sums
    if (threadIdx.x == kScanThreads - 1) carry = before + inclusive;
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kTile)
    scatter_kernel(const std::uint32_t* keys_in, const std::uint32_t* values_in, std::uint32_t* keys_out,
                   std::uint32_t* values_out, std::int64_t n, int shift, const std::uint32_t* offsets, int tiles) {
  __shared__ std::uint32_t warp_counts[kWarps][kDigits];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  for (int w = 0; w < kWarps; ++w) warp_counts[w][threadIdx.x] = 0;
  __syncthreads();
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const bool valid = i < n;
  const std::uint32_t key = valid ? keys_in[i] : 0u;
  // Past the end a lane takes a value no digit has, so it matches no valid lane.
  const unsigned digit = valid ? digit_of(key, shift) : 0x100u + static_cast<unsigned>(lane);
  const unsigned same = __match_any_sync(0xffffffffu, digit);
  const unsigned below = same & ((1u << lane) - 1u);
  if (valid && below == 0u) warp_counts[warp][digit] = static_cast<std::uint32_t>(__popc(same));
  __syncthreads();
  if (!valid) return;
  std::uint32_t rank = static_cast<std::uint32_t>(__popc(below));
  for (int w = 0; w < warp; ++w) rank += warp_counts[w][digit];
  const std::uint32_t at = offsets[static_cast<std::int64_t>(digit) * tiles + blockIdx.x] + rank;
  keys_out[at] = key;
  values_out[at] = values_in[i];
}

}  // namespace

cudaError_t stable_sort_pairs(std::uint32_t* const (&keys)[2], std::uint32_t* const (&values)[2], std::int64_t n,
                              int bits, std::uint32_t* digit_counts, int& result, cudaStream_t stream) {
  result = 0;
  if (n <= 0) return cudaSuccess;
  if (n > UINT32_MAX || bits < 1 || bits > 32) return cudaErrorInvalidValue;
  const auto tiles = static_cast<int>(embedding_scratch::sort_tiles(n));
  for (int shift = 0; shift < bits; shift += 8) {
    const int from = result, to = 1 - result;
    count_digits_kernel<<<tiles, kTile, 0, stream>>>(keys[from], n, shift, digit_counts, tiles);
    prefix_counts_kernel<<<1, kScanThreads, 0, stream>>>(digit_counts, static_cast<std::int64_t>(kDigits) * tiles);
    scatter_kernel<<<tiles, kTile, 0, stream>>>(keys[from], values[from], keys[to], values[to], n, shift, digit_counts,
                                                tiles);
    const cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) return status;
    result = to;
  }
  return cudaSuccess;
}

}  // namespace adamant::kernels::cuda::sort_detail
