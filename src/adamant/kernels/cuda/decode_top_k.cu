// The k largest logits of each row on the GPU (kernels/decode.h's decode_top_k), so that
// sampling copies k (value, id) pairs to the host instead of the whole vocabulary.
//
// One block per row. The row's keys go to shared memory once when they fit (the 50K GPT-2
// vocabulary does), since the passes below read every key again. A radix select finds the k-th largest key: four passes
// over the row, each a 256-bin histogram of the next 8 bits among the logits that match the bits chosen so far
// (warp-aggregated, since most logits share their top bits), fix the threshold key T one byte at a time. When more
// logits equal T than places are left, four more passes over the inverted ids of those logits pick the lowest ids, so
// the selection is exactly the first k in (larger, then lower id) order. One more pass collects them, and each of the k
// candidates counts the candidates that come before it, which is its place in the sorted output.
#include "adamant/kernels/cuda/decode_launchers.h"
#include "adamant/kernels/decode_order.h"

namespace adamant::kernels::cuda::launchers {

namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 256;
// Dynamic shared memory for the keys, beside the ~3 KB of static shared memory (227 KB per block
// on Hopper).
constexpr std::size_t kMaxSharedKeyBytes = 200 * 1024;

struct Selection {
  int histogram[kBins];
  std::uint32_t prefix;
  int still_needed;
  int equal_count;  // logits matching the prefix in the chosen bin
  int taken;
};

// One 8-bit radix step: among the values v (of ids below vocab, not masked) with
// matches(v), the bin of bits [shift, shift + 8) of part(v) that holds the still_needed-th
// largest; narrows sel.prefix, sel.still_needed and sel.equal_count.
template <typename Matches, typename Part>
__device__ void radix_step(Selection& sel, int vocab, int masked, int shift, std::uint32_t prefix_mask,
                           Matches&& matches, Part&& part) {
  for (int i = threadIdx.x; i < kBins; i += kThreads) sel.histogram[i] = 0;
  __syncthreads();
  const std::uint32_t prefix = sel.prefix;
  for (int base = 0; base < vocab; base += kThreads) {  // the same trip count for every lane
    const int v = base + threadIdx.x;
    bool counts = v < vocab && v != masked && matches(v);
    std::uint32_t bin = 0;
    if (counts) {
      const std::uint32_t bits = part(v);
      counts = (bits & prefix_mask) == prefix;
      bin = (bits >> shift) & 0xffu;
    }
    const unsigned voters = __ballot_sync(0xffffffffu, counts);
    if (counts) {
      const unsigned peers = __match_any_sync(voters, bin);
      if (static_cast<int>(threadIdx.x % 32) == __ffs(peers) - 1) atomicAdd(&sel.histogram[bin], __popc(peers));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // walk down from the largest bin
    int needed = sel.still_needed, bin = kBins - 1;
    while (sel.histogram[bin] < needed) needed -= sel.histogram[bin--];
    sel.still_needed = needed;
    sel.equal_count = sel.histogram[bin];
    sel.prefix = prefix | (static_cast<std::uint32_t>(bin) << shift);
  }
  __syncthreads();
}

template <bool kKeysShared>
__global__ void __launch_bounds__(kThreads) decode_top_k_kernel(const float* logits, float* values, std::int32_t* ids,
                                                                std::int64_t row_stride, int vocab, int k, int masked) {
  extern __shared__ std::uint32_t shared_keys[];  // [vocab] when kKeysShared
  __shared__ Selection sel;
  __shared__ std::uint32_t candidate_keys[kMaxTopK];
  __shared__ std::int32_t candidate_ids[kMaxTopK];
  const float* row = logits + static_cast<std::int64_t>(blockIdx.x) * row_stride;
  if (threadIdx.x == 0) {
    sel.prefix = 0;
    sel.still_needed = k;
    sel.taken = 0;
  }
  __syncthreads();
  if (kKeysShared) {
    for (int v = threadIdx.x; v < vocab; v += kThreads) shared_keys[v] = decode_order_key(row[v]);
  }
  const auto any = [](int) { return true; };
  const auto key_of = [&](int v) { return kKeysShared ? shared_keys[v] : decode_order_key(row[v]); };
  std::uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    radix_step(sel, vocab, masked, shift, mask, any, key_of);
    mask |= 0xffu << shift;
  }
  const std::uint32_t threshold = sel.prefix;
  // Ids up to last_id of the logits equal to the threshold are taken: all, or the lowest.
  std::uint32_t last_id = 0xffffffffu;
  if (sel.equal_count > sel.still_needed) {
    if (threadIdx.x == 0) sel.prefix = 0;
    __syncthreads();
    const auto at_threshold = [&](int v) { return key_of(v) == threshold; };
    const auto inverted_id = [](int v) { return ~static_cast<std::uint32_t>(v); };  // lower ids rank higher
    mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      radix_step(sel, vocab, masked, shift, mask, at_threshold, inverted_id);
      mask |= 0xffu << shift;
    }
    last_id = ~sel.prefix;
  }
  for (int v = threadIdx.x; v < vocab; v += kThreads) {
    if (v == masked) continue;
    const std::uint32_t key = key_of(v);
    if (key > threshold || (key == threshold && static_cast<std::uint32_t>(v) <= last_id)) {
      const int slot = atomicAdd(&sel.taken, 1);
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
  const std::size_t key_bytes = static_cast<std::size_t>(vocab) * sizeof(std::uint32_t);
  if (key_bytes <= kMaxSharedKeyBytes) {
    // Above 48 KB a kernel must opt in to more shared memory.
    const cudaError_t status = cudaFuncSetAttribute(
        decode_top_k_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(key_bytes));
    if (status == cudaSuccess) {
      decode_top_k_kernel<true><<<static_cast<unsigned>(rows), kThreads, key_bytes, stream>>>(
          logits, values, ids, row_stride, vocab, k, masked);
      return cudaGetLastError();
    }
    cudaGetLastError();  // a GPU with less shared memory: read the keys from global memory instead
  }
  decode_top_k_kernel<false>
      <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, values, ids, row_stride, vocab, k, masked);
  return cudaGetLastError();
}

}  // namespace adamant::kernels::cuda::launchers
