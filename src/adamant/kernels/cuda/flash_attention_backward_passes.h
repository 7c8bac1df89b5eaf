#pragma once
// The passes of the CUDA flash attention backward (flash_attention_backward.cu runs
// them on one stream), each in its own file so that they compile in parallel:
//  - query pass: dq, one block per 128 or 192 queries; as it starts, each block makes its
//    rows' statistics (per (token, head), D = rowsum(d_out o), logsumexp * log2(e) and
//    D (1 - p), D over the attention dropout's 1/(1-p)) into BackwardOperands::statistics;
//  - key pass: dk and dv, one block per 128 keys, reading the statistics of the queries it
//    meets, so it runs after the query pass.
// With BackwardOperands::d_scores the key pass runs first and stores its score gradients,
// so a statistics kernel makes the statistics before it, and the query pass reads the
// stored score gradients instead of recomputing them.
// Each pass is a kernel on Hopper's warpgroup tensor cores (wgmma.cuh) for every head
// size.
// No output element is summed by more than one thread, in a fixed order, so runs
// agree bit for bit. (One pass, the key pass adding each key block's dq into fp32 sums
// in a fixed turn, was measured slower at every shape: the reductions into L2 cost more
// than the query pass; BENCHMARKS.md, flash attention.)
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "adamant/kernels/cuda/flash_attention_launchers.h"

namespace adamant::kernels::cuda::flash_attention_launchers {

// Floats of a query's row statistics that the wgmma key pass copies: (D, lse log2 e,
// D (1 - p), 0), the last one padding a tensor copy's row to 16 bytes.
constexpr int kStatisticsRow = 4;

// What the statistics' third float multiplies D by: 1 - p, the inverse of the dropout's keep scale.
inline float inverse_keep_scale(const Dropout& dropout) { return dropout.enabled ? 1.0f / dropout.keep_scale : 1.0f; }

// The tensor maps the wgmma passes copy their tiles from, encoded once a backward (the
// same for every group of slots): q, k and v rows of qkv; d_out rows; the statistics, read
// as fp32 rows of a token's heads' records.
struct BackwardMaps {
  CUtensorMap qkv;
  CUtensorMap d_out;
  CUtensorMap statistics;
};
cudaError_t encode_backward_maps(BackwardMaps& maps, const BackwardOperands& operands, const Problem& problem);

cudaError_t launch_backward_key_pass(const BackwardMaps& maps, const BackwardOperands& operands, const Problem& problem,
                                     const Dropout& dropout, cudaStream_t stream);
cudaError_t launch_backward_query_pass(const BackwardMaps& maps, const BackwardOperands& operands,
                                       const Problem& problem, const Dropout& dropout, cudaStream_t stream);
// The query pass from the score gradients the key pass stored (operands.d_scores), which
// with dropout are the gradients over 1/(1-p).
cudaError_t launch_backward_stored_query_pass(const BackwardMaps& maps, const BackwardOperands& operands,
                                              const Problem& problem, const Dropout& dropout, cudaStream_t stream);

}  // namespace adamant::kernels::cuda::flash_attention_launchers
