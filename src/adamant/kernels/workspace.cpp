#include "adamant/kernels/workspace.h"

#include "adamant/core/error.h"

namespace adamant::kernels {

Workspace::Workspace(const Stream& stream, const WorkspaceNeeds& needs) : Workspace(stream.device(), stream, needs) {}

Workspace::Workspace(Device device, const Stream& stream, const WorkspaceNeeds& needs)
    : device_(device), stream_handle_(stream.handle()), needs_(needs) {
  ADAMANT_CHECK(needs.layernorm_rows >= 0 && needs.layernorm_cols >= 0,
                "Workspace: layernorm needs of {} x {}; rows and columns must not be negative", needs.layernorm_rows,
                needs.layernorm_cols);
  ADAMANT_CHECK(needs.weight_grad_elements >= 0, "Workspace: weight_grad_elements is {}; it must not be negative",
                needs.weight_grad_elements);
  ADAMANT_CHECK(stream.device().is_cpu() || stream.device() == device,
                "Workspace on {}: its stream is on {}; use a stream of the workspace's device", device.str(),
                stream.device().str());
  if (device.is_cuda()) {
    resources_.reset(cuda::make_workspace_resources(device, needs));
  } else if (needs.weight_grad_elements > 0) {
    weight_grad_scratch_ = Buffer(weight_grad_scratch_bytes(needs.weight_grad_elements), device);
  }
}

Tensor Workspace::weight_grad_scratch(DType dtype) {
  if (weight_grad_scratch_.empty()) return {};
  ADAMANT_CHECK(dtype == DType::f32 || dtype == DType::f64,
                "Workspace::weight_grad_scratch: {} asked for; the CPU kernels compute in fp32 or fp64",
                dtype_name(dtype));
  return Tensor::flat(weight_grad_scratch_.data(), dtype, device_,
                      static_cast<std::size_t>(needs_.weight_grad_elements));
}

void* Workspace::attention_statistics() const {
  return resources_ ? cuda::attention_statistics_of(*resources_) : nullptr;
}

void* Workspace::attention_scores() const { return resources_ ? cuda::attention_scores_of(*resources_) : nullptr; }

}  // namespace adamant::kernels
