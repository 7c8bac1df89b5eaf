#pragma once
// The one way a kernel reaches its backend. A public kernel is defined inline in its
// header (kernels/*.h), which also declares its two implementations (namespaces cpu
// and cuda): the definition builds a KernelCall from its operands, checks every
// operand once (dtype, device, size, and what the CUDA implementation needs beyond
// that: alignment, supported sizes), and runs the CPU or the CUDA implementation by
// the operands' device. The implementations in kernels/cpu/ and kernels/cuda/ check
// nothing again. docs/architecture.md, "Adding a kernel".
//
// The model kernels follow one dtype convention (mixed precision as Megatron's O2 on a
// GPU): on the CPU every floating operand has the reference operand's dtype (fp32 or
// fp64); on a GPU activations and their gradients (x, in, out, qkv, d_out, d_in, d_x,
// d_qkv) and weights (linear, layernorm, embeddings: the model's flat bf16 weight
// buffer) are bf16, weight gradients (d_weight, d_bias, d_word, d_position,
// d_embedding) and statistics (layernorm mean and rstd, logsumexp, losses, logits,
// the vocabulary-parallel classifier's stats) fp32, except that the classifiers also take
// bf16 logits (kernels/cross_entropy.h); tokens and targets are i32. Every CUDA reduction
// and accumulation is in fp32.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "adamant/core/error.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"
#include "adamant/kernels/cuda_launch.h"
#include "adamant/kernels/workspace.h"

// The CUDA implementation of a call, as the second argument of KernelCall::run: either a
// launcher of a *.cu file, which takes plain pointers and `launch` (a CudaLaunch) and
// returns its cudaError_t, or a host-side entry point that takes Tensors (and ignores
// `launch`). Only compiled where its symbols exist: a build without CUDA gets nullptr,
// and a clear error for GPU operands.
#ifdef ADAMANT_HAVE_CUDA
#define ADAMANT_CUDA_CALL(...) \
  [&]([[maybe_unused]] const ::adamant::kernels::CudaLaunch& launch) { return __VA_ARGS__; }
#else
#define ADAMANT_CUDA_CALL(...) nullptr
#endif

namespace adamant::kernels {

// What KernelCall::run needs of the CUDA runtime, as plain C++ (kernels/cuda/dispatch_cuda.cpp).
namespace cuda {
// Makes a GPU current for its lifetime and restores the caller's after.
class CurrentDevice {
 public:
  explicit CurrentDevice(Device device);
  ~CurrentDevice();
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
  int current_ = 0;
};
int multiprocessor_count(Device device);
[[noreturn]] void fail_launch(const char* op, int status);
}  // namespace cuda

// A tensor's data as 16-bit patterns (bf16), the form the CUDA launchers take.
inline std::uint16_t* bits16_of(const Tensor& t) { return static_cast<std::uint16_t*>(t.data); }

// Whether every operand's data is aligned for `bytes`-wide vector accesses (an empty one is).
inline bool aligned_to(std::size_t bytes, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands) {
    if (reinterpret_cast<std::uintptr_t>(t->data) % bytes != 0) return false;
  }
  return true;
}

// What a model-kernel operand is, which fixes its dtype on a GPU.
enum class Role {
  activation,   // activations and their gradients: bf16 on a GPU
  weight,       // model weights: bf16 on a GPU
  weight_grad,  // gradients of weights: fp32 on a GPU
  statistic,    // layernorm mean/rstd, logsumexp, losses, logits: fp32 on a GPU
  // Gradients a kernel adds into the model's gradient buffer in place (the linear layers'
  // weights, the embeddings): fp32 on a GPU, or bf16 where the buffer is (GptConfig::grad_buffer).
  buffer_grad,
};

// The dtype the model kernels take for an operand of `role` on `device`; `cpu_dtype`
// (fp32 or fp64) is the one dtype of every CPU operand.
inline DType model_dtype(Device device, Role role, DType cpu_dtype) {
  if (!device.is_cuda()) return cpu_dtype;
  return role == Role::activation || role == Role::weight ? DType::bf16 : DType::f32;
}

class KernelCall {
 public:
  // `reference` fixes the device (and the CPU dtype of the Role checks).
  KernelCall(const char* op, const Tensor& reference, const Stream& stream)
      : op_(op), dtype_(reference.dtype), device_(reference.device), stream_(stream) {}

  // A model kernel: on the CPU every floating operand is fp32 or fp64, all alike.
  static KernelCall model(const char* op, const Tensor& reference, const Stream& stream) {
    KernelCall call(op, reference, stream);
    ADAMANT_CHECK(call.on_cuda() || call.dtype_ == DType::f32 || call.dtype_ == DType::f64,
                  "{}: operands of {}; the CPU model kernels take fp32 or fp64", op, dtype_name(call.dtype_));
    return call;
  }

  const char* op() const { return op_; }
  Device device() const { return device_; }
  bool on_cuda() const { return device_.is_cuda(); }

  // The dtype of an operand of `role`.
  DType dtype(Role role) const { return model_dtype(device_, role, dtype_); }
  // The dtype operand `t` of `role` must have: dtype(role), or bf16 for a bf16 gradient buffer on a GPU.
  DType dtype_for(Role role, const Tensor& t) const {
    return role == Role::buffer_grad && on_cuda() && t.dtype == DType::bf16 ? DType::bf16 : dtype(role);
  }

  // Exactly `numel` elements of `dtype` on the call's device.
  void exact(const char* name, const Tensor& t, std::int64_t numel, DType dtype) const {
    check_common(name, t, dtype);
    ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) == numel, "{}: operand {} has {} elements, expected {}", op_,
                  name, t.numel(), numel);
  }
  void exact(const char* name, const Tensor& t, std::int64_t numel, Role role) const {
    exact(name, t, numel, dtype_for(role, t));
  }
  void at_least(const char* name, const Tensor& t, std::int64_t numel, DType dtype) const {
    check_common(name, t, dtype);
    ADAMANT_CHECK(static_cast<std::int64_t>(t.numel()) >= numel, "{}: operand {} has {} elements, needs at least {}",
                  op_, name, t.numel(), numel);
  }
  void at_least(const char* name, const Tensor& t, std::int64_t numel, Role role) const {
    at_least(name, t, numel, dtype_for(role, t));
  }
  // On the call's device, any dtype and size (an empty operand passes).
  void same_device(const char* name, const Tensor& t) const {
    ADAMANT_CHECK(t.data == nullptr || t.device == device_, "{}: operand {} is on {}, the others on {}", op_, name,
                  t.device.str(), device_.str());
  }
  // Where the CUDA implementation reads `t` in vectors of `bytes`.
  void cuda_aligned(const char* name, const Tensor& t, std::size_t bytes) const {
    ADAMANT_CHECK(!on_cuda() || reinterpret_cast<std::uintptr_t>(t.data) % bytes == 0,
                  "{}: operand {} at {} is not {}-byte aligned; allocate it on a {}-byte boundary", op_, name, t.data,
                  bytes, bytes);
  }
  // `workspace` was made for this call's device and stream (kernels/workspace.h).
  void uses(const Workspace& workspace) const {
    ADAMANT_CHECK(workspace.serves(device_, stream_),
                  "{}: the workspace was made for another stream or device (it is on {}, the call on {}); make a "
                  "kernels::Workspace for each stream that runs kernels",
                  op_, workspace.device().str(), device_.str());
  }
  void uses_matmul(const Workspace& workspace) const {
    uses(workspace);
    ADAMANT_CHECK(workspace.needs().matmul,
                  "{}: the workspace has no matrix products; make it with WorkspaceNeeds::matmul set", op_);
  }
  void positive(const char* what, std::int64_t value) const {
    ADAMANT_CHECK(value > 0, "{}: {} is {}, must be positive", op_, what, value);
  }
  void non_negative(const char* what, std::int64_t value) const {
    ADAMANT_CHECK(value >= 0, "{}: {} is {}, must not be negative", op_, what, value);
  }

  // Runs cpu_call() or cuda_call() (ADAMANT_CUDA_CALL(...)) by the operands' device.
  template <typename CpuCall, typename CudaCall>
  void run(CpuCall&& cpu_call, CudaCall&& cuda_call) const {
    if (!on_cuda()) {
      cpu_call();
      return;
    }
    if constexpr (std::is_null_pointer_v<std::decay_t<CudaCall>>) {
      fail(
          "{}: operands on {}, but this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON or run on the "
          "CPU",
          op_, device_.str());
    } else {
      // A CPU stream means the device's default stream; a CUDA stream must be on the operands' GPU.
      ADAMANT_CHECK(stream_.device().is_cpu() || stream_.device() == device_,
                    "{}: operands on {} but the stream is on {}; use a stream of the operands' device", op_,
                    device_.str(), stream_.device().str());
      const cuda::CurrentDevice current(device_);
      CudaLaunch launch;
      launch.stream = stream_.handle();
      using Result = decltype(cuda_call(launch));
      if constexpr (std::is_void_v<Result>) {  // a host-side entry point
        cuda_call(launch);
      } else {  // a launcher: its status
        launch.multiprocessors = cuda::multiprocessor_count(device_);
        const int status = static_cast<int>(cuda_call(launch));
        if (status != 0) cuda::fail_launch(op_, status);
      }
    }
  }

 private:
  void check_common(const char* name, const Tensor& t, DType dtype) const {
    ADAMANT_CHECK(t.data != nullptr, "{}: operand {} is empty", op_, name);
    ADAMANT_CHECK(t.device == device_, "{}: operand {} is on {}, the others on {}", op_, name, t.device.str(),
                  device_.str());
    ADAMANT_CHECK(t.dtype == dtype, "{}: operand {} is {}, expected {}{}", op_, name, dtype_name(t.dtype),
                  dtype_name(dtype), on_cuda() ? " (the GPU dtype convention of kernels/dispatch.h)" : "");
  }

  const char* op_;
  DType dtype_;
  Device device_;
  const Stream& stream_;
};

}  // namespace adamant::kernels
