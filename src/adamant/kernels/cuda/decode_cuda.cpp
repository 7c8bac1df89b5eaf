// Tensor-level entry points of the CUDA decoding-step kernels (kernels/decode.h): the
// dispatcher has checked the operands and made their GPU current; these launch and turn a
// failure into adamant::Error naming the kernel.
#include <climits>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/kernels/cuda/decode_launchers.h"
#include "adamant/kernels/decode.h"

namespace adamant::kernels::cuda {

static_assert(launchers::kMaxHeadDim == kMaxDecodeHeadDim);
static_assert(launchers::kMaxGemvRows == kMaxDecodeGemvRows);
static_assert(launchers::kMaxTopK == kMaxDecodeTopK);

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, std::int64_t vocab, std::int64_t places,
                      const Stream& stream) {
  check_cuda_launch(launchers::decode_embedding(
                        static_cast<const std::int32_t*>(tokens.data), static_cast<const std::int32_t*>(positions.data),
                        word.data, position.data, out.data, batch, channels, vocab, places, cuda_stream_of(stream)),
                    "decode_embedding");
}

void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream) {
  constexpr const char* kOp = "decode_attention";
  ADAMANT_CHECK(shape.capacity <= launchers::kMaxDecodeCapacity,
                "{}: a cache of {} positions per sequence; the GPU kernel keeps at most {} scores in shared memory",
                kOp, shape.capacity, launchers::kMaxDecodeCapacity);
  ADAMANT_CHECK(shape.batch * shape.heads < INT_MAX, "{}: {} sequences x heads in one launch", kOp,
                shape.batch * shape.heads);
  check_cuda_launch(launchers::decode_attention(qkv.data, cache.data, static_cast<const std::int32_t*>(positions.data),
                                                out.data, static_cast<int>(shape.batch),
                                                static_cast<int>(shape.capacity), static_cast<int>(shape.heads),
                                                static_cast<int>(shape.head_dim), cuda_stream_of(stream)),
                    kOp);
}

void decode_linear(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                   const LinearShape& shape, const DecodeLinearArgs& args, const Stream& stream) {
  constexpr const char* kOp = "decode_linear";
  ADAMANT_CHECK(shape.in_features <= INT_MAX && shape.out_features <= INT_MAX, "{}: {} -> {} features in one launch",
                kOp, shape.in_features, shape.out_features);
  launchers::DecodeLinearProblem problem;
  problem.in = in.data;
  problem.weight = weight.data;
  problem.bias = bias.data;
  problem.residual = args.epilogue == DecodeEpilogue::residual ? residual.data : nullptr;
  problem.out = out.data;
  problem.fp32_out = out.dtype == DType::f32;
  problem.rows = static_cast<int>(shape.rows);
  problem.in_features = static_cast<int>(shape.in_features);
  problem.out_features = static_cast<int>(shape.out_features);
  problem.epilogue = args.epilogue == DecodeEpilogue::gelu       ? launchers::DecodeLinearEpilogue::gelu
                     : args.epilogue == DecodeEpilogue::residual ? launchers::DecodeLinearEpilogue::residual
                                                                 : launchers::DecodeLinearEpilogue::none;
  problem.tanh_gelu = args.gelu == GeluForm::tanh;
  check_cuda_launch(launchers::decode_linear(problem, cuda_stream_of(stream)), kOp);
}

void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked, const Stream& stream) {
  constexpr const char* kOp = "decode_top_k";
  ADAMANT_CHECK(rows <= INT_MAX && vocab <= INT_MAX, "{}: {} rows of {} logits in one launch", kOp, rows, vocab);
  check_cuda_launch(
      launchers::decode_top_k(static_cast<const float*>(logits.data), static_cast<float*>(values.data),
                              static_cast<std::int32_t*>(ids.data), static_cast<int>(rows), row_stride,
                              static_cast<int>(vocab), static_cast<int>(k), masked, cuda_stream_of(stream)),
      kOp);
}

}  // namespace adamant::kernels::cuda
