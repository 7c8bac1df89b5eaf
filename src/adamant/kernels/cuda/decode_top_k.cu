// The k largest logits of each row on the GPU (kernels/decode.h's decode_top_k), so that
// sampling copies k (value, id) pairs to the host instead of the whole vocabulary.
//
// One block per row. A radix select finds the k-th largest key: four passes over the row,
// each a 256-bin histogram of the next 8 bits among the logits that match the bits chosen so
// far, fix the threshold key T one byte at a time. Then every logit above T is a candidate, and
// of those equal to T the lowest ids fill the remaining places: each thread takes a contiguous
// range of ids and a block-wide scan of the threads' counts ranks the ties by id. Last, each of
// the k candidates counts the candidates that come before it (larger, or equal with a lower
// id), which is its place in the sorted output.
#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "adamant/kernels/cuda/decode_launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 256;

// kernels::decode_order_key: unsigned keys that order like the floats, -0 as +0.
__device__ std::uint32_t order_key(float value) {
  std::uint32_t bits = __float_as_uint(value);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

__global__ void __launch_bounds__(kThreads) decode_top_k_kernel(const float* logits, float* values, std::int32_t* ids,
                                                                std::int64_t row_stride, int vocab, int k, int masked) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int histogram[kBins];
  __shared__ std::uint32_t chosen_prefix;
  __shared__ int still_needed;
  __shared__ int above_count;
  __shared__ std::uint32_t candidate_keys[kMaxTopK];
  __shared__ std::int32_t candidate_ids[kMaxTopK];

  const float* row = logits + static_cast<std::int64_t>(blockIdx.x) * row_stride;
  if (threadIdx.x == 0) {
    chosen_prefix = 0;
    still_needed = k;
    above_count = 0;
  }
  std::uint32_t prefix_mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < kBins; i += kThreads) histogram[i] = 0;
    __syncthreads();
    const std::uint32_t prefix = chosen_prefix;
    for (int v = threadIdx.x; v < vocab; v += kThreads) {
      if (v == masked) continue;
      const std::uint32_t key = order_key(row[v]);
      if ((key & prefix_mask) == prefix) atomicAdd(&histogram[(key >> shift) & 0xffu], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // the bin holding the still_needed-th largest, from the top
      int needed = still_needed, bin = kBins - 1;
      while (histogram[bin] < needed) needed -= histogram[bin--];
      still_needed = needed;
      chosen_prefix = prefix | (static_cast<std::uint32_t>(bin) << shift);
    }
    prefix_mask |= 0xffu << shift;
    __syncthreads();
  }
  const std::uint32_t threshold = chosen_prefix;
  const int ties_taken = still_needed;  // of the logits equal to the threshold, the lowest ids
  const int above = k - ties_taken;

  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int first = threadIdx.x * chunk, last = min(vocab, first + chunk);
  int ties = 0;
  for (int v = first; v < last; ++v) ties += v != masked && order_key(row[v]) == threshold ? 1 : 0;
  int tie_rank = 0;
  Scan(scan_storage).ExclusiveSum(ties, tie_rank);
  for (int v = first; v < last; ++v) {
    if (v == masked) continue;
    const std::uint32_t key = order_key(row[v]);
    int slot = -1;
    if (key > threshold) {
      slot = atomicAdd(&above_count, 1);
    } else if (key == threshold && tie_rank < ties_taken) {
      slot = above + tie_rank++;
    }
    if (slot >= 0) {
      candidate_keys[slot] = key;
      candidate_ids[slot] = v;
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < k; c += kThreads) {
    const std::uint32_t key = candidate_keys[c];
    const std::int32_t id = candidate_ids[c];
    int place = 0;
    for (int o = 0; o < k; ++o) {
      place += candidate_keys[o] > key || (candidate_keys[o] == key && candidate_ids[o] < id) ? 1 : 0;
    }
    values[static_cast<std::int64_t>(blockIdx.x) * k + place] = row[id];
    ids[static_cast<std::int64_t>(blockIdx.x) * k + place] = id;
  }
}

}  // namespace

cudaError_t decode_top_k(const float* logits, float* values, std::int32_t* ids, int rows, std::int64_t row_stride,
                         int vocab, int k, int masked, cudaStream_t stream) {
  if (rows < 1 || k < 1 || k > kMaxTopK || k > vocab) return cudaErrorInvalidValue;
  decode_top_k_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, values, ids, row_stride, vocab, k,
                                                                            masked);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::launchers
