#pragma once
// What some GPU kernels keep between calls, owned by the run that makes the calls (the
// model, the optimizer's gradient buffers, a test, a benchmark) and made before its first
// step, so that no step allocates device memory:
//  - matmul: cuBLASLt's handle, the plan of each problem (built on a problem's first call,
//    with the recorded algorithm when `matmul_algorithms` has one; host memory only) and
//    its 32 MiB workspace, which the linear layer's
//    bias-gradient sums borrow between products (gemm, linear_*, the classifiers,
//    decode_linear);
//  - layernorm_backward's (and residual_layernorm_backward's) column sums, for up to
//    `layernorm_rows` x `layernorm_cols`;
//  - squared_norm's partial sums;
//  - flash_attention_backward's row statistics, `attention_statistics_bytes` of them, and its
//    score scratch, `attention_scores_bytes` of it (kernels/flash_attention_scores.h);
//  - on the CPU, the product of a linear_backward that adds its weight gradient
//    (WeightGrad::accumulate), `weight_grad_elements` of it.
// A workspace serves one stream: calls on a stream run in order, so they can share one, and
// a kernel refuses the workspace of another stream. On the CPU it holds only the weight
// gradients' product, but the kernels check what it was made for on both backends, so a
// run that sizes it wrongly fails in CPU tests too.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "adamant/core/buffer.h"
#include "adamant/core/device.h"
#include "adamant/core/stream.h"
#include "adamant/core/tensor.h"

namespace adamant::kernels {

class MatmulAlgorithmTable;  // kernels/matmul_algorithms.h

struct WorkspaceNeeds {
  bool matmul = false;
  // Recorded algorithms for the matmuls (tune-matmul); null: cuBLASLt's heuristics choose.
  std::shared_ptr<const MatmulAlgorithmTable> matmul_algorithms = nullptr;
  std::int64_t layernorm_rows = 0;
  std::int64_t layernorm_cols = 0;
  bool squared_norm = false;
  std::size_t attention_statistics_bytes = 0;
  std::size_t attention_scores_bytes = 0;
  // The largest weight gradient a linear_backward adds to. The CPU kernel forms the product
  // whole in the workspace before adding it, so that the result is exactly the old value
  // plus the product (BLAS with beta 1 would add each block of the inner dimension on its
  // own); a GPU's GEMM adds in its epilogue and takes no memory for it.
  std::int64_t weight_grad_elements = 0;
};

// Bytes a CPU workspace holds for `weight_grad_elements`: room for fp64, the widest of the
// CPU kernels' dtypes (the planner counts the same).
constexpr std::size_t weight_grad_scratch_bytes(std::int64_t weight_grad_elements) {
  return static_cast<std::size_t>(weight_grad_elements) * sizeof(double);
}

namespace cuda {
class WorkspaceResources;  // a GPU workspace's memory and handles (kernels/cuda/workspace_resources.h)
// Made and freed by kernels/cuda/workspace_cuda.cpp; a build without CUDA refuses to make one.
WorkspaceResources* make_workspace_resources(Device device, const WorkspaceNeeds& needs);
void* attention_statistics_of(WorkspaceResources& resources);
void* attention_scores_of(WorkspaceResources& resources);
struct WorkspaceResourcesDeleter {
  void operator()(WorkspaceResources* resources) const noexcept;
};
}  // namespace cuda

class Workspace {
 public:
  // For kernels on `stream`'s device; on `device` when `stream` is the CPU stream, which
  // stands for a GPU's default stream there.
  Workspace(const Stream& stream, const WorkspaceNeeds& needs);
  Workspace(Device device, const Stream& stream, const WorkspaceNeeds& needs);
  // Serves no stream and holds nothing, as a moved-from workspace: for an owner that learns
  // its needs only after its members are made, and then moves a real one in.
  Workspace() = default;
  Workspace(Workspace&& other) noexcept = default;
  Workspace& operator=(Workspace&& other) noexcept = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Device device() const { return device_; }
  const WorkspaceNeeds& needs() const { return needs_; }
  // Whether it was made for kernels on `device` enqueued on `stream`.
  bool serves(Device device, const Stream& stream) const {
    return device == device_ && stream.handle() == stream_handle_;
  }
  // The attention backward's statistics and score scratch as bytes on the workspace's GPU; null
  // where it has none (on the CPU, or made without attention_statistics_bytes or
  // attention_scores_bytes).
  void* attention_statistics() const;
  void* attention_scores() const;
  // The CPU's weight-gradient product (WeightGrad::accumulate) as weight_grad_elements of
  // `dtype` (fp32 or fp64); empty on a GPU or where none was asked for.
  Tensor weight_grad_scratch(DType dtype);
  // A GPU workspace's resources (CUDA builds; kernels/cuda only).
  cuda::WorkspaceResources& resources() const { return *resources_; }

 private:
  Device device_{};
  void* stream_handle_ = nullptr;
  WorkspaceNeeds needs_{};
  std::unique_ptr<cuda::WorkspaceResources, cuda::WorkspaceResourcesDeleter> resources_;
  Buffer weight_grad_scratch_;  // the CPU's, room for weight_grad_elements fp64 values
};

}  // namespace adamant::kernels
