// The word-table gradient of the embedding backward (kernels/embedding.h):
// d_word[tokens[r] - vocab_start] += d_out[r] over the tokens of the slice, deterministic
// without floating-point atomics, and as fast for a token that fills a tenth of the batch
// (a comma) as for a rare one.
//
// 1. keys: each position's table row (or `vocab` for a token outside the slice) and the
//    position itself.
// 2. A stable radix sort (stable_key_sort.h) of (row, position): the positions of one row
//    become one segment of the sorted array, in ascending order.
// 3. Chunks of kChunk sorted entries, one block each: every run of equal rows in the chunk
//    is summed in order. A run that is a whole segment is added to d_word at once; the run
//    that ends a chunk and goes on into the next is the start of a segment (the chunk owns
//    it: partial_last), and the run that opens a chunk and came from the previous one is a
//    piece of an earlier chunk's segment (partial_first).
// 4. The owner of each long segment adds partial_last and the following chunks'
//    partial_first, in order, onto d_word.
// Every row is therefore summed in position order and grouped by chunk the same way on
// every run: bit-identical results. The order differs from the CPU kernel's
// (((d_word + g1) + g2) + ...), so the two agree to rounding only.
#include <cstddef>
#include <cstdint>

#include "adamant/kernels/cuda/embedding_word_grad.h"
#include "adamant/kernels/cuda/grad_rows.cuh"
#include "adamant/kernels/cuda/pointwise_model_device.cuh"
#include "adamant/kernels/cuda/stable_key_sort.h"
#include "adamant/kernels/embedding_scratch.h"

namespace adamant::kernels::cuda::embedding_detail {

namespace {

using pointwise_detail::kVectorWidth;
using pointwise_detail::load_bf16;
using pointwise_detail::load_f32;
using pointwise_detail::store_f32;

constexpr int kChunk = static_cast<int>(embedding_scratch::kChunk);  // sorted entries per block, one thread each
constexpr std::uint32_t kNoOwner = 0xffffffffu;

// The number of key bits: rows [0, vocab] (vocab marks "outside the slice").
int key_bits(std::int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (std::uint64_t{1} << bits) <= static_cast<std::uint64_t>(vocab)) ++bits;
  return bits;
}

__global__ void word_grad_keys_kernel(const std::int32_t* tokens, std::uint32_t* keys, std::uint32_t* positions,
                                      std::int64_t rows, std::int64_t vocab, std::int64_t vocab_start) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int64_t row = static_cast<std::int64_t>(tokens[r]) - vocab_start;
  keys[r] = static_cast<std::uint32_t>(row >= 0 && row < vocab ? row : vocab);
  positions[r] = static_cast<std::uint32_t>(r);
}

// d_word's kWidth channels at `out` += sum: one run's or one segment's total, added once
// (and rounded once, in a bf16 buffer).
template <int kWidth, typename Grad>
__device__ __forceinline__ void add_to_word_row(Grad* out, const float (&sum)[kWidth]) {
  float old[kWidth];
  grad_rows::load<kWidth>(out, old);
#pragma unroll
  for (int k = 0; k < kWidth; ++k) old[k] += sum[k];
  grad_rows::store<kWidth>(out, old);
}

// Step 3: block = chunk of sorted entries; thread = channel group (kWidth channels).
template <int kWidth, typename Grad>
__global__ void __launch_bounds__(kChunk)
    word_grad_runs_kernel(const std::uint16_t* __restrict__ d_out, const std::uint32_t* __restrict__ keys,
                          const std::uint32_t* __restrict__ positions, Grad* __restrict__ d_word,
                          float* __restrict__ partial_first, float* __restrict__ partial_last,
                          std::uint32_t* __restrict__ chunk_first_row, std::uint32_t* __restrict__ chunk_whole_run,
                          std::uint32_t* __restrict__ chunk_owned_row, std::int64_t rows, std::int64_t channels,
                          std::int64_t vocab) {
  __shared__ std::uint32_t row_of[kChunk];
  __shared__ std::uint32_t position_of[kChunk];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t chunk = blockIdx.x;
  const std::int64_t begin = chunk * kChunk;
  const int count = static_cast<int>(rows - begin < kChunk ? rows - begin : kChunk);
  const auto outside = static_cast<std::uint32_t>(vocab);
  if (tid < count) {
    row_of[tid] = keys[begin + tid];
    position_of[tid] = positions[begin + tid];
  }
  __syncthreads();
  // Rows outside the slice sort last: only the first `inside` entries are summed.
  int inside = 0;
  for (int hi = count; inside < hi;) {
    const int mid = (inside + hi) / 2;
    if (row_of[mid] == outside) {
      hi = mid;
    } else {
      inside = mid + 1;
    }
  }
  // The rows just before and after the chunk say whether its first run continues a segment
  // and whether its last run goes on.
  const std::uint32_t before = begin > 0 ? keys[begin - 1] : outside;
  const std::uint32_t after = begin + count < rows ? keys[begin + count] : outside;
  const std::uint32_t first_row = row_of[0];
  const std::uint32_t last_row = row_of[count - 1];
  const bool first_continues = first_row != outside && first_row == before;
  const bool last_goes_on = last_row != outside && last_row == after;
  // The last run starts a segment this chunk owns unless it is also the first run, continued.
  const bool owns_last = last_goes_on && !(first_continues && first_row == last_row);
  if (tid == 0) {
    chunk_first_row[chunk] = first_row;
    chunk_whole_run[chunk] = first_row == last_row ? 1u : 0u;
    chunk_owned_row[chunk] = owns_last ? last_row : kNoOwner;
  }

  const std::int64_t groups = channels / kWidth;
  for (std::int64_t g = tid; g < groups; g += kChunk) {
    const std::int64_t c = g * kWidth;
    float sum[kWidth];
#pragma unroll
    for (int k = 0; k < kWidth; ++k) sum[k] = 0.0f;
    int run_start = 0;
    // The rows of kAhead entries are loaded before any is added: the loads overlap.
    constexpr int kAhead = 4;
    for (int first = 0; first < inside; first += kAhead) {
      float x[kAhead][kWidth];
#pragma unroll
      for (int j = 0; j < kAhead; ++j) {
        const int i = first + j;
        if (i < inside) load_bf16<kWidth>(d_out + static_cast<std::int64_t>(position_of[i]) * channels + c, x[j]);
      }
#pragma unroll
      for (int j = 0; j < kAhead; ++j) {
        const int i = first + j;
        if (i >= inside) break;
        const std::uint32_t row = row_of[i];
#pragma unroll
        for (int k = 0; k < kWidth; ++k) sum[k] += x[j][k];
        if (i + 1 < inside && row_of[i + 1] == row) continue;
        // The run [run_start, i] of `row` ends here.
        float* target = nullptr;
        if (run_start == 0 && first_continues) {
          target = partial_first + chunk * channels + c;  // a piece of an earlier chunk's segment
        } else if (i + 1 == count && last_goes_on) {
          target = partial_last + chunk * channels + c;  // the start of this chunk's segment
        }
        if (target != nullptr) {
          store_f32<kWidth>(target, sum);
        } else {
          add_to_word_row<kWidth>(d_word + static_cast<std::int64_t>(row) * channels + c, sum);  // the whole segment
        }
#pragma unroll
        for (int k = 0; k < kWidth; ++k) sum[k] = 0.0f;
        run_start = i + 1;
      }
    }
  }
}

// Step 4: block = chunk; it finishes the segment its last run starts, if any.
template <int kWidth, typename Grad>
__global__ void __launch_bounds__(kChunk)
    word_grad_segments_kernel(const float* __restrict__ partial_first, const float* __restrict__ partial_last,
                              const std::uint32_t* __restrict__ chunk_first_row,
                              const std::uint32_t* __restrict__ chunk_whole_run,
                              const std::uint32_t* __restrict__ chunk_owned_row, Grad* __restrict__ d_word,
                              std::int64_t chunks, std::int64_t channels) {
  const std::int64_t chunk = blockIdx.x;
  const std::uint32_t row = chunk_owned_row[chunk];
  if (row == kNoOwner) return;
  const std::int64_t groups = channels / kWidth;
  for (std::int64_t g = threadIdx.x; g < groups; g += kChunk) {
    const std::int64_t c = g * kWidth;
    float sum[kWidth];
    load_f32<kWidth>(partial_last + chunk * channels + c, sum);
    // The following chunks open with this row; each ends the segment unless it is one run
    // of the row and the next chunk opens with the row too.
    for (std::int64_t next = chunk + 1; next < chunks; ++next) {
      float x[kWidth];
      load_f32<kWidth>(partial_first + next * channels + c, x);
#pragma unroll
      for (int k = 0; k < kWidth; ++k) sum[k] += x[k];
      const bool goes_on = chunk_whole_run[next] != 0 && next + 1 < chunks && chunk_first_row[next + 1] == row;
      if (!goes_on) break;
    }
    add_to_word_row<kWidth>(d_word + static_cast<std::int64_t>(row) * channels + c, sum);
  }
}

template <typename Grad>
cudaError_t launch_word_grad(const std::uint16_t* d_out, const std::int32_t* tokens, Grad* d_word, std::int64_t rows,
                             std::int64_t channels, std::int64_t vocab, std::int64_t vocab_start, void* scratch,
                             std::size_t scratch_bytes, bool vectorized, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (rows > INT32_MAX || vocab >= INT32_MAX) return cudaErrorInvalidValue;
  const embedding_scratch::Layout s = embedding_scratch::layout(rows, channels);
  if (scratch == nullptr || s.total > scratch_bytes) return cudaErrorInvalidValue;
  auto* base = static_cast<unsigned char*>(scratch);
  auto words = [base](std::size_t offset) { return reinterpret_cast<std::uint32_t*>(base + offset); };
  auto floats = [base](std::size_t offset) { return reinterpret_cast<float*>(base + offset); };
  std::uint32_t* const keys[2] = {words(s.keys[0]), words(s.keys[1])};
  std::uint32_t* const positions[2] = {words(s.positions[0]), words(s.positions[1])};

  constexpr int kKeyThreads = 256;
  const auto key_blocks = static_cast<unsigned>((rows + kKeyThreads - 1) / kKeyThreads);
  word_grad_keys_kernel<<<key_blocks, kKeyThreads, 0, stream>>>(tokens, keys[0], positions[0], rows, vocab,
                                                                vocab_start);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  int sorted = 0;
  status =
      sort_detail::stable_sort_pairs(keys, positions, rows, key_bits(vocab), words(s.digit_counts), sorted, stream);
  if (status != cudaSuccess) return status;

  const std::int64_t chunks = embedding_scratch::chunks(rows);
  const bool vectors = vectorized && channels % kVectorWidth == 0;
  auto* runs = vectors ? word_grad_runs_kernel<kVectorWidth, Grad> : word_grad_runs_kernel<1, Grad>;
  runs<<<static_cast<unsigned>(chunks), kChunk, 0, stream>>>(
      d_out, keys[sorted], positions[sorted], d_word, floats(s.partial_first), floats(s.partial_last),
      words(s.chunk_first_row), words(s.chunk_whole_run), words(s.chunk_owned_row), rows, channels, vocab);
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  auto* segments = vectors ? word_grad_segments_kernel<kVectorWidth, Grad> : word_grad_segments_kernel<1, Grad>;
  segments<<<static_cast<unsigned>(chunks), kChunk, 0, stream>>>(floats(s.partial_first), floats(s.partial_last),
                                                                 words(s.chunk_first_row), words(s.chunk_whole_run),
                                                                 words(s.chunk_owned_row), d_word, chunks, channels);
  return cudaGetLastError();
}

}  // namespace

cudaError_t word_grad(const std::uint16_t* d_out, const std::int32_t* tokens, void* d_word, DType grad_dtype,
                      std::int64_t rows, std::int64_t channels, std::int64_t vocab, std::int64_t vocab_start,
                      void* scratch, std::size_t scratch_bytes, bool vectorized, cudaStream_t stream) {
  switch (grad_dtype) {
    case DType::f32:
      return launch_word_grad(d_out, tokens, static_cast<float*>(d_word), rows, channels, vocab, vocab_start, scratch,
                              scratch_bytes, vectorized, stream);
    case DType::bf16:
      return launch_word_grad(d_out, tokens, static_cast<std::uint16_t*>(d_word), rows, channels, vocab, vocab_start,
                              scratch, scratch_bytes, vectorized, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::embedding_detail
