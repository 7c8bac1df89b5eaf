#include "adamant/kernels/workspace.h"

#include "adamant/core/error.h"

namespace adamant::kernels {

Workspace::Workspace(const Stream& stream, const WorkspaceNeeds& needs) : Workspace(stream.device(), stream, needs) {}

Workspace::Workspace(Device device, const Stream& stream, const WorkspaceNeeds& needs)
    : device_(device), stream_handle_(stream.handle()), needs_(needs) {
  ADAMANT_CHECK(needs.layernorm_rows >= 0 && needs.layernorm_cols >= 0,
                "Workspace: layernorm needs of {} x {}; rows and columns must not be negative", needs.layernorm_rows,
                needs.layernorm_cols);
  ADAMANT_CHECK(stream.device().is_cpu() || stream.device() == device,
                "Workspace on {}: its stream is on {}; use a stream of the workspace's device", device.str(),
                stream.device().str());
  if (device.is_cuda()) {
    resources_.reset(cuda::make_workspace_resources(device, needs));
  }
}

void* Workspace::attention_scores() const { return resources_ ? cuda::attention_scores_of(*resources_) : nullptr; }

}  // namespace adamant::kernels
