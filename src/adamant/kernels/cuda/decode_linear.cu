// The decoding step's linear layer on bf16 (kernels/decode.h's decode_linear) for up to
// kMaxGemvRows rows: a matrix-vector product bound by reading the weights once.
//
// kSplit warps per output feature (1, 2 or 4): the lanes read their part of the feature's
// weight row together in 16-byte pieces (8 bf16 each, coalesced), multiply them with the same
// pieces of every input row (a few KB, served from L1), and warp sums, then the parts' sums,
// give one fp32 sum per row. Bandwidth needs many loads in flight on every SM: a narrow layer
// (768 features of GPT-3 126M's projections) splits each row over more warps, a wide one (the
// 50K-row classifier) has thousands of warps already. The bias, GELU or residual is applied
// before the single store.
#include <cuda_bf16.h>

#include <cstdint>

#include "adamant/kernels/cuda/decode_launchers.h"

namespace adamant::kernels::cuda::launchers {

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarp * kWarpsPerBlock;
constexpr int kWarpsWanted = 132 * 16;  // enough loads in flight on an H100/H200
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;

__device__ void widen(const uint4& piece, float (&out)[8]) {
  const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&piece);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ float gelu(float v, bool tanh_form) {
  if (tanh_form) return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  return 0.5f * v * (1.0f + erff(v * kInvSqrt2));
}

__device__ void store(float* out, float v) { *out = v; }
__device__ void store(__nv_bfloat16* out, float v) { *out = __float2bfloat16_rn(v); }

template <int kRows, int kSplit, typename Out>
__global__ void __launch_bounds__(kThreads)
    decode_linear_kernel(const __nv_bfloat16* __restrict__ in, const __nv_bfloat16* __restrict__ weight,
                         const __nv_bfloat16* __restrict__ bias, const __nv_bfloat16* __restrict__ residual,
                         Out* __restrict__ out, int in_features, int out_features, DecodeLinearEpilogue epilogue,
                         bool tanh_gelu) {
  constexpr int kFeaturesPerBlock = kWarpsPerBlock / kSplit;
  __shared__ float part_sums[kWarpsPerBlock][kRows];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int n = blockIdx.x * kFeaturesPerBlock + warp / kSplit, part = warp % kSplit;
  const bool active = n < out_features;
  const int pieces = in_features / 8;
  const uint4* w = reinterpret_cast<const uint4*>(weight + static_cast<std::int64_t>(active ? n : 0) * in_features);
  const uint4* x = reinterpret_cast<const uint4*>(in);
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
#pragma unroll 4
  for (int p = part * kWarp + lane; active && p < pieces; p += kSplit * kWarp) {
    float wf[8];
    widen(__ldg(w + p), wf);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float xf[8];
      widen(__ldg(x + r * pieces + p), xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[r] = fmaf(xf[i], wf[i], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], offset);
  }
  if (kSplit > 1) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) part_sums[warp][r] = acc[r];
    }
    __syncthreads();
    if (lane == 0 && part == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        for (int q = 1; q < kSplit; ++q) acc[r] += part_sums[warp + q][r];
      }
    }
  }
  if (lane != 0 || part != 0 || !active) return;
  const float b = bias != nullptr ? __bfloat162float(bias[n]) : 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const std::int64_t at = static_cast<std::int64_t>(r) * out_features + n;
    float value = acc[r] + b;
    if (epilogue == DecodeLinearEpilogue::gelu) value = gelu(value, tanh_gelu);
    if (epilogue == DecodeLinearEpilogue::residual) value += __bfloat162float(residual[at]);
    store(out + at, value);
  }
}

template <int kRows, int kSplit, typename Out>
cudaError_t launch_split(const DecodeLinearProblem& p, Out* out, cudaStream_t stream) {
  constexpr int kFeaturesPerBlock = kWarpsPerBlock / kSplit;
  const unsigned blocks = static_cast<unsigned>((p.out_features + kFeaturesPerBlock - 1) / kFeaturesPerBlock);
  decode_linear_kernel<kRows, kSplit, Out><<<blocks, kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(p.in), static_cast<const __nv_bfloat16*>(p.weight),
      static_cast<const __nv_bfloat16*>(p.bias), static_cast<const __nv_bfloat16*>(p.residual), out, p.in_features,
      p.out_features, p.epilogue, p.tanh_gelu);
  return cudaGetLastError();
}

template <int kRows, typename Out>
cudaError_t launch_out(const DecodeLinearProblem& p, Out* out, cudaStream_t stream) {
  // Split a row over more warps while the layer is narrow and each part keeps a piece per lane.
  int split = 1;
  while (split < kWarpsPerBlock && p.out_features * split < kWarpsWanted && p.in_features / 8 >= kWarp * split * 2)
    split *= 2;
  if (split == 4) return launch_split<kRows, 4>(p, out, stream);
  if (split == 2) return launch_split<kRows, 2>(p, out, stream);
  return launch_split<kRows, 1>(p, out, stream);
}

template <int kRows>
cudaError_t launch_rows(const DecodeLinearProblem& p, cudaStream_t stream) {
  if (p.fp32_out) return launch_out<kRows>(p, static_cast<float*>(p.out), stream);
  return launch_out<kRows>(p, static_cast<__nv_bfloat16*>(p.out), stream);
}

}  // namespace

cudaError_t decode_linear(const DecodeLinearProblem& p, cudaStream_t stream) {
  static_assert(kMaxGemvRows == 8, "one instantiation per row count below");
  if (p.in_features % 8 != 0 || p.in_features <= 0 || p.out_features <= 0) return cudaErrorInvalidValue;
  switch (p.rows) {
    case 1:
      return launch_rows<1>(p, stream);
    case 2:
      return launch_rows<2>(p, stream);
    case 3:
      return launch_rows<3>(p, stream);
    case 4:
      return launch_rows<4>(p, stream);
    case 5:
      return launch_rows<5>(p, stream);
    case 6:
      return launch_rows<6>(p, stream);
    case 7:
      return launch_rows<7>(p, stream);
    case 8:
      return launch_rows<8>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace adamant::kernels::cuda::launchers
