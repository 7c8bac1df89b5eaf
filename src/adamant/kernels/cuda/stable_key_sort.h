#pragma once
// A stable sort of (key, value) pairs of 32-bit words on the GPU by the low bits of the
// keys: a least-significant-digit radix sort, 8 bits a pass, in which equal keys keep
// their order and every count is an integer, so that the result is the same on every
// run. Its scratch is laid out by the caller (kernels/embedding_scratch.h). For *.cu files.
#include <cuda_runtime.h>

#include <cstdint>

namespace adamant::kernels::cuda::sort_detail {

// keys[0], values[0] hold the n input pairs; the sorted pairs end in keys[result],
// values[result], result = (passes % 2) with passes = ceil(bits / 8). digit_counts: 256 *
// ceil(n / 256) words.
cudaError_t stable_sort_pairs(std::uint32_t* const (&keys)[2], std::uint32_t* const (&values)[2], std::int64_t n,
                              int bits, std::uint32_t* digit_counts, int& result, cudaStream_t stream);

}  // namespace adamant::kernels::cuda::sort_detail
