// Dispatch of the decoding-step kernels by the operands' device, after checking
// dtypes, devices and sizes here once (kernels/decode.h).
#include "adamant/kernels/decode.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "adamant/core/error.h"
#include "adamant/kernels/cpu/decode_cpu.h"
#include "adamant/kernels/gemm.h"
#include "adamant/kernels/residual.h"
#ifdef ADAMANT_HAVE_CUDA
#include "adamant/kernels/cuda/decode_cuda.h"
// The CUDA call, compiled only where its symbols exist.
#define ADAMANT_DECODE_CUDA_CALL(...) [&] { __VA_ARGS__; }
#else
#define ADAMANT_DECODE_CUDA_CALL(...) nullptr
#endif

namespace adamant::kernels {

namespace {

// The floating dtype of the operands: bf16 on a GPU, the reference's fp32 or fp64 on the CPU.
DType floating_dtype(const char* op, const Tensor& reference) {
  if (reference.device.is_cuda()) return DType::bf16;
  ADAMANT_CHECK(reference.dtype == DType::f32 || reference.dtype == DType::f64,
                "{}: operands of {}; the CPU kernel takes fp32 or fp64", op, dtype_name(reference.dtype));
  return reference.dtype;
}

void check_operand(const char* op, const char* name, const Tensor& t, DType dtype, Device device, std::int64_t numel,
                   bool at_least = false) {
  ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op, name);
  ADAMANT_CHECK(t.device == device, "{}: operand {} is on {}, the others on {}", op, name, t.device.str(),
                device.str());
  ADAMANT_CHECK(t.dtype == dtype, "{}: operand {} is {}, expected {}", op, name, dtype_name(t.dtype),
                dtype_name(dtype));
  const auto have = static_cast<std::int64_t>(t.numel());
  ADAMANT_CHECK(at_least ? have >= numel : have == numel, "{}: operand {} has {} elements, expected {}{}", op, name,
                have, at_least ? "at least " : "", numel);
}

template <typename CpuCall, typename CudaCall>
void run_on(const char* op, Device device, const Stream& stream, CpuCall&& cpu_call, CudaCall&& cuda_call) {
  if (device.is_cpu()) {
    cpu_call();
    return;
  }
  ADAMANT_CHECK(stream.device().is_cpu() || stream.device() == device,
                "{}: operands on {} but the stream is on {}; use a stream of the operands' device", op, device.str(),
                stream.device().str());
  if constexpr (std::is_null_pointer_v<std::decay_t<CudaCall>>) {
    fail("{}: operands on {}, but this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON", op,
         device.str());
  } else {
    cuda_call();
  }
}

}  // namespace

void decode_embedding(const Tensor& tokens, const Tensor& positions, const Tensor& word, const Tensor& position,
                      Tensor out, std::int64_t batch, std::int64_t channels, const Stream& stream) {
  constexpr const char* kOp = "decode_embedding";
  ADAMANT_CHECK(batch > 0 && channels > 0, "{}: batch {} channels {}; both must be positive", kOp, batch, channels);
  const Device device = word.device;
  const DType dtype = floating_dtype(kOp, word);
  check_operand(kOp, "tokens", tokens, DType::i32, device, batch);
  check_operand(kOp, "positions", positions, DType::i32, device, batch);
  check_operand(kOp, "word", word, dtype, device, channels, true);
  check_operand(kOp, "position", position, dtype, device, channels, true);
  check_operand(kOp, "out", out, dtype, device, batch * channels);
  const std::int64_t vocab = static_cast<std::int64_t>(word.numel()) / channels;
  const std::int64_t places = static_cast<std::int64_t>(position.numel()) / channels;
  if (device.is_cpu()) {  // on a GPU the ids live in device memory and the kernel cannot report them
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int32_t token = tokens.ptr<std::int32_t>()[b], place = positions.ptr<std::int32_t>()[b];
      ADAMANT_CHECK(token >= 0 && token < vocab, "{}: token {} outside the table of {} rows", kOp, token, vocab);
      ADAMANT_CHECK(place >= 0 && place < places, "{}: position {} outside the table of {} positions", kOp, place,
                    places);
    }
  }
  run_on(
      kOp, device, stream, [&] { cpu::decode_embedding(tokens, positions, word, position, out, batch, channels); },
      ADAMANT_DECODE_CUDA_CALL(
          cuda::decode_embedding(tokens, positions, word, position, out, batch, channels, vocab, places, stream)));
}

void decode_attention(const Tensor& qkv, Tensor cache, const Tensor& positions, Tensor out, const DecodeShape& shape,
                      const Stream& stream) {
  constexpr const char* kOp = "decode_attention";
  ADAMANT_CHECK(shape.batch > 0 && shape.capacity > 0 && shape.heads > 0 && shape.head_dim > 0 &&
                    shape.head_dim <= kMaxDecodeHeadDim,
                "{}: batch {} capacity {} heads {} head_dim {}; all positive, head_dim at most {}", kOp, shape.batch,
                shape.capacity, shape.heads, shape.head_dim, kMaxDecodeHeadDim);
  const Device device = qkv.device;
  const DType dtype = floating_dtype(kOp, qkv);
  const std::int64_t W = shape.heads * shape.head_dim;
  check_operand(kOp, "qkv", qkv, dtype, device, shape.batch * 3 * W);
  check_operand(kOp, "cache", cache, dtype, device, shape.batch * shape.capacity * 3 * W);
  check_operand(kOp, "positions", positions, DType::i32, device, shape.batch);
  check_operand(kOp, "out", out, dtype, device, shape.batch * W);
  if (device.is_cpu()) {
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      const std::int32_t place = positions.ptr<std::int32_t>()[b];
      ADAMANT_CHECK(place >= 0 && place < shape.capacity, "{}: position {} of sequence {} outside the cache of {}", kOp,
                    place, b, shape.capacity);
    }
  }
  run_on(
      kOp, device, stream, [&] { cpu::decode_attention(qkv, cache, positions, out, shape); },
      ADAMANT_DECODE_CUDA_CALL(cuda::decode_attention(qkv, cache, positions, out, shape, stream)));
}

namespace {

// The product and its epilogue from the general kernels: fp32 weights on the CPU, and on a GPU
// more rows than the matrix-vector kernel takes (where a GEMM reads the weights once anyway).
void decode_linear_composed(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                            Tensor out, const LinearShape& shape, const DecodeLinearArgs& args, const Stream& stream) {
  const std::int64_t numel = shape.rows * shape.out_features;
  if (out.dtype != in.dtype) {  // fp32 logits from 16-bit activations: no bias, no epilogue (checked)
    gemm(Transpose::no, Transpose::yes, shape.rows, shape.out_features, shape.in_features, 1.0, in, weight, 0.0, out,
         stream);
    return;
  }
  linear_forward(in, weight, bias, out, shape, stream);
  if (args.epilogue == DecodeEpilogue::gelu) gelu_forward(out, out, numel, args.gelu, stream);
  if (args.epilogue == DecodeEpilogue::residual) residual_add(residual, out, out, numel, stream);
}

}  // namespace

void decode_linear(const Tensor& in, const Tensor& weight, const Tensor& bias, const Tensor& residual, Tensor out,
                   const LinearShape& shape, const DecodeLinearArgs& args, const Stream& stream) {
  constexpr const char* kOp = "decode_linear";
  ADAMANT_CHECK(shape.rows > 0 && shape.in_features > 0 && shape.out_features > 0,
                "{}: {} rows, {} -> {} features; all must be positive", kOp, shape.rows, shape.in_features,
                shape.out_features);
  const Device device = in.device;
  const DType activation = device.is_cuda() ? DType::bf16 : DType::f32;
  const bool fp32_weights = weight.dtype == DType::f32;
  ADAMANT_CHECK(weight.dtype == DType::bf16 || (fp32_weights && device.is_cpu()),
                "{}: weights of {} on {}; the kernel takes bf16 weights (fp32 too on the CPU)", kOp,
                dtype_name(weight.dtype), device.str());
  check_operand(kOp, "in", in, activation, device, shape.rows * shape.in_features);
  check_operand(kOp, "weight", weight, weight.dtype, device, shape.out_features * shape.in_features);
  ADAMANT_CHECK(out.dtype == activation || out.dtype == DType::f32, "{}: operand out is {}, expected {} or fp32", kOp,
                dtype_name(out.dtype), dtype_name(activation));
  check_operand(kOp, "out", out, out.dtype, device, shape.rows * shape.out_features);
  const bool widening = out.dtype != activation;
  ADAMANT_CHECK(!widening || (bias.data == nullptr && args.epilogue == DecodeEpilogue::none),
                "{}: fp32 output from {} activations takes neither a bias nor an epilogue", kOp,
                dtype_name(activation));
  if (bias.data != nullptr) check_operand(kOp, "bias", bias, activation, device, shape.out_features);
  if (args.epilogue == DecodeEpilogue::residual) {
    check_operand(kOp, "residual", residual, activation, device, shape.rows * shape.out_features);
    ADAMANT_CHECK(residual.data != out.data, "{}: residual and out are the same memory; give out its own", kOp);
  }
  // The GPU kernel reads 8 bf16 at a time from 16-byte aligned rows.
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool gpu_kernel_fits =
      shape.rows <= kMaxDecodeGemvRows && shape.in_features % 8 == 0 && aligned(in.data) && aligned(weight.data);
  const bool matrix_vector = !fp32_weights && (device.is_cpu() || gpu_kernel_fits);
  if (!matrix_vector) {
    decode_linear_composed(in, weight, bias, residual, out, shape, args, stream);
    return;
  }
  run_on(
      kOp, device, stream, [&] { cpu::decode_linear_bf16(in, weight, bias, residual, out, shape, args); },
      ADAMANT_DECODE_CUDA_CALL(cuda::decode_linear(in, weight, bias, residual, out, shape, args, stream)));
}

void decode_top_k(const Tensor& logits, Tensor values, Tensor ids, std::int64_t rows, std::int64_t row_stride,
                  std::int64_t vocab, std::int64_t k, std::int32_t masked, const Stream& stream) {
  constexpr const char* kOp = "decode_top_k";
  ADAMANT_CHECK(rows > 0 && vocab > 0 && vocab <= row_stride, "{}: {} rows of {} logits in rows of {}", kOp, rows,
                vocab, row_stride);
  ADAMANT_CHECK(k >= 1 && k <= std::min(vocab, kMaxDecodeTopK), "{}: k is {}; it takes 1..{}", kOp, k,
                std::min(vocab, kMaxDecodeTopK));
  ADAMANT_CHECK(masked < vocab, "{}: masked id {} outside the {} logits", kOp, masked, vocab);
  ADAMANT_CHECK(masked < 0 || k < vocab, "{}: k {} of {} logits with one masked", kOp, k, vocab);
  const Device device = logits.device;
  check_operand(kOp, "logits", logits, DType::f32, device, (rows - 1) * row_stride + vocab, true);
  check_operand(kOp, "values", values, DType::f32, device, rows * k);
  check_operand(kOp, "ids", ids, DType::i32, device, rows * k);
  run_on(
      kOp, device, stream, [&] { cpu::decode_top_k(logits, values, ids, rows, row_stride, vocab, k, masked); },
      ADAMANT_DECODE_CUDA_CALL(cuda::decode_top_k(logits, values, ids, rows, row_stride, vocab, k, masked, stream)));
}

}  // namespace adamant::kernels
