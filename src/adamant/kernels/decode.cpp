// Dispatch of the decoding-step kernels by the operands' device, after checking
// dtypes, devices and sizes here once (kernels/decode.h).
#include "adamant/kernels/decode.h"

#include <type_traits>

#include "adamant/core/error.h"
#include "adamant/kernels/cpu/decode_cpu.h"
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

}  // namespace adamant::kernels
