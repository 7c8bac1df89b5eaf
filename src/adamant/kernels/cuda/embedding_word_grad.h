#pragma once
// The word-table gradient of the CUDA embedding backward (embedding_word_grad.cu), for
// embedding.cu's launcher: a stable sort of the positions by table row, then ordered sums
// per row. It runs in a scratch the caller provides.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamant/core/dtype.h"

namespace adamant::kernels::cuda::embedding_detail {

// d_word[tokens[r] - vocab_start] += d_out[r] for the tokens in [vocab_start, vocab_start +
// vocab), d_word fp32 or bf16 (`grad_dtype`). `scratch`: embedding_scratch::layout(rows,
// channels).total bytes (kernels/embedding_scratch.h). `vectorized`: d_out and d_word are
// 16-byte aligned for 8-wide accesses.
cudaError_t word_grad(const std::uint16_t* d_out, const std::int32_t* tokens, void* d_word, DType grad_dtype,
                      std::int64_t rows, std::int64_t channels, std::int64_t vocab, std::int64_t vocab_start,
                      void* scratch, std::size_t scratch_bytes, bool vectorized, cudaStream_t stream);

}  // namespace adamant::kernels::cuda::embedding_detail
