#pragma once
// Plain launch functions behind the CUDA flash attention kernels (raw pointers,
// sizes, a stream; no Tensor or fmt, so that nvcc compiles the *.cu files).
// flash_attention_cuda.cpp calls these with operands the dispatcher
// (kernels/flash_attention.cpp) has checked; each returns the launch status.
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "adamant/kernels/cuda_launch.h"

namespace adamant::kernels::cuda::flash_attention_launchers {

struct Problem {
  int batch;
  int seq;
  int heads;
  int head_dim;
  // The (sample, head) slots a launch covers, slot = sample * heads + head: all of them, or
  // slot_count from first_slot (the backward's passes over a score scratch that holds fewer).
  int first_slot = 0;
  int slot_count = -1;  // -1: batch * heads
  int slots() const { return slot_count < 0 ? batch * heads : slot_count; }
};

// Attention dropout as kernels/dropout.h defines it: the Philox stream of sample b is
// stream_base + b * stream_per_sample, draws laid out as kernels/attention_dropout_layout.h says.
struct Dropout {
  bool enabled;
  float probability;
  float keep_scale;  // attention_dropout_layout::keep_scale(probability): 1 / the resolved keep probability
  std::uint64_t seed;
  std::uint64_t stream_base;
  std::uint64_t stream_per_sample;
  const std::uint64_t* sample_offset;  // null, or device memory: samples to add to every sample index
};

// head_dim must be one of these (kernels/flash_attention.h's kCudaFlashHeadDims, which
// flash_attention_cuda.cpp checks against this list): 64, 128, 80 (GPT-3 2.7B: 2560 / 32
// heads) and 96; each is a kernel instantiation (flash_attention_dispatch.cuh), and the
// tiles take any multiple of 16 (wgmma.cuh's Panels).
inline constexpr std::array<std::int64_t, 4> kSupportedHeadDims{64, 80, 96, 128};

// 16-bit arrays hold bf16 bit patterns and must be 16-byte aligned; logsumexp is
// fp32 [batch, heads, seq] (natural log of each row's softmax denominator of the
// scaled scores, maximum included), 4-byte aligned.
struct ForwardOperands {
  const std::uint16_t* qkv;  // [batch, seq, 3, heads, head_dim]
  std::uint16_t* out;        // [batch, seq, heads, head_dim]
  float* logsumexp;          // [batch, heads, seq]
};

struct BackwardOperands {
  const std::uint16_t* d_out;
  const std::uint16_t* qkv;
  const std::uint16_t* out;
  const float* logsumexp;
  std::uint16_t* d_qkv;  // overwritten
  // The row statistics the passes share (kernels::flash_attention_statistics_bytes, 16-byte
  // aligned): per (token, head), fp32 (D = rowsum(d_out o), logsumexp log2(e), D (1 - p), 0),
  // with D (1 - p) = D over the attention dropout's 1/(1-p) (D without dropout).
  float* statistics;
  // Null, or room for the score gradients of score_slots (sample, head) slots
  // (kernels::flash_attention_scores_bytes of one slot each): the key pass then leaves each
  // tile's score gradients there and the query pass reads them instead of recomputing them.
  // With fewer slots than batch * heads the two passes run a group of slots at a time.
  std::uint16_t* d_scores = nullptr;
  int score_slots = 0;
  // Null, or the QKV bias gradient's partial sums, fp32 [batch * ceil(seq / 16), 3 heads
  // head_dim]: each warp that stores 16 rows of d_qkv (a sample's rows 16 t .. 16 t + 15) writes
  // their column sums as stored to row (sample ceil(seq / 16) + t), in row order, so that every
  // element is written once.
  float* bias_partials = nullptr;
};

// Rows of d_qkv a row of BackwardOperands::bias_partials sums: a warp's rows (flash_attention_tiles.cuh's kWarpRows).
constexpr int kBiasPartialRows = 16;

// Floats of BackwardOperands::bias_partials for `problem`.
inline std::int64_t bias_partials_floats(const Problem& problem) {
  const std::int64_t tiles =
      static_cast<std::int64_t>(problem.batch) * ((problem.seq + kBiasPartialRows - 1) / kBiasPartialRows);
  return tiles * 3 * problem.heads * problem.head_dim;
}

cudaError_t flash_attention_forward(const ForwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                    cudaStream_t stream);
// With bias.sums, also the QKV bias gradient: the column sums of d_qkv as stored, the passes'
// partial sums (BackwardOperands::bias_partials, in bias.scratch) added up in a fixed order, or,
// where the scratch holds fewer than bias_partials_floats, column_sums of d_qkv (column_sums.h).
cudaError_t flash_attention_backward(const BackwardOperands& operands, const Problem& problem, const Dropout& dropout,
                                     cudaStream_t stream, const ColumnSumsOut& bias = {});

}  // namespace adamant::kernels::cuda::flash_attention_launchers
