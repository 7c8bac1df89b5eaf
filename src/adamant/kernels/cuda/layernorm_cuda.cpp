// The CUDA entry points for layernorm (kernels/layernorm.h), called by their
// dispatchers with checked operands (bf16 activations and weights, fp32 mean/rstd
// and weight gradients, one GPU): make that GPU current, launch, and turn a failure into adamant::Error. Backward
// needs an fp32 workspace for its column sums; it is kept per (GPU, stream) and only
// grows, so after the first step of a shape no call allocates.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "adamant/core/cuda_launch_guard.h"
#include "adamant/core/memory_stats.h"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/layernorm.h"

namespace adamant::kernels::cuda {

namespace {

// Column-sum workspaces, one per (GPU, stream): calls on one stream are ordered by
// it, calls on different streams may overlap. Growth frees and allocates in stream
// order, so work still queued on the old block finishes before it is reused.
class ColumnSumWorkspaces {
 public:
  ColumnSumWorkspaces() = default;
  ~ColumnSumWorkspaces() {
    for (auto& [key, block] : blocks_) {
      // At process exit the runtime may already be unloaded; nothing to release then.
      if (cudaSetDevice(key.first) == cudaSuccess) cudaFree(block.data);
      note_release(Device::cuda(key.first), block.bytes);
    }
  }
  ColumnSumWorkspaces(const ColumnSumWorkspaces&) = delete;
  ColumnSumWorkspaces& operator=(const ColumnSumWorkspaces&) = delete;

  // The caller has made `device_index` current.
  float* for_stream(int device_index, cudaStream_t stream, std::int64_t floats) {
    const std::lock_guard lock(mutex_);
    Block& block = blocks_[std::make_pair(device_index, static_cast<void*>(stream))];
    const auto bytes = static_cast<std::size_t>(floats) * sizeof(float);
    if (block.bytes < bytes) {
      if (block.data != nullptr) {
        ADAMANT_CUDA_CHECK(cudaFreeAsync(block.data, stream));
        note_release(Device::cuda(device_index), block.bytes);
      }
      block.data = nullptr;
      block.bytes = 0;
      void* pointer = nullptr;
      ADAMANT_CUDA_CHECK(cudaMallocAsync(&pointer, bytes, stream));
      note_allocation(Device::cuda(device_index), bytes);
      block.data = static_cast<float*>(pointer);
      block.bytes = bytes;
    }
    return block.data;
  }

 private:
  struct Block {
    float* data = nullptr;
    std::size_t bytes = 0;
  };
  std::mutex mutex_;
  std::map<std::pair<int, void*>, Block> blocks_;
};

ColumnSumWorkspaces& column_sum_workspaces() {
  static ColumnSumWorkspaces workspaces;
  return workspaces;
}

const std::uint16_t* bits_of(const Tensor& t) { return static_cast<const std::uint16_t*>(t.data); }

CudaLaunch launch_for(const CudaLaunchGuard& guard, const Stream& stream, bool vectorized) {
  CudaLaunch launch;
  launch.stream = stream.handle();
  launch.multiprocessors = cuda_multiprocessor_count(guard.device_index());
  launch.vectorized = vectorized;
  return launch;
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double epsilon, Tensor out,
                       Tensor mean, Tensor rstd, const RowsShape& shape, const Stream& stream) {
  constexpr const char* kOp = "layernorm_forward";
  const CudaLaunchGuard guard(x.device, kOp);
  const CudaLaunch launch = launch_for(guard, stream, aligned_to(16, {&x, &weight, &bias, &out}));
  check_cuda_launch(
      launchers::layernorm_forward(bits_of(x), bits_of(weight), bits_of(bias), static_cast<float>(epsilon),
                                   static_cast<std::uint16_t*>(out.data), static_cast<float*>(mean.data),
                                   static_cast<float*>(rstd.data), shape.rows, shape.cols, launch),
      kOp);
}

void layernorm_backward(const Tensor& d_out, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, Tensor d_x, Tensor d_weight, Tensor d_bias, const RowsShape& shape,
                        const Stream& stream) {
  constexpr const char* kOp = "layernorm_backward";
  const CudaLaunchGuard guard(x.device, kOp);
  const CudaLaunch launch = launch_for(guard, stream, aligned_to(16, {&d_out, &x, &weight, &d_x}));
  float* workspace =
      column_sum_workspaces().for_stream(guard.device_index(), cuda_stream_of(stream),
                                         launchers::layernorm_backward_workspace_floats(shape.rows, shape.cols));
  check_cuda_launch(
      launchers::layernorm_backward(bits_of(d_out), bits_of(x), bits_of(weight), static_cast<const float*>(mean.data),
                                    static_cast<const float*>(rstd.data), static_cast<std::uint16_t*>(d_x.data),
                                    static_cast<float*>(d_weight.data), static_cast<float*>(d_bias.data), workspace,
                                    shape.rows, shape.cols, launch),
      kOp);
}

}  // namespace adamant::kernels::cuda
