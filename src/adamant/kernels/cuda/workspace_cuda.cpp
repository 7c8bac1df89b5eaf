// What a GPU kernels::Workspace holds (kernels/workspace.h), allocated at once from its needs.
#include "adamant/kernels/cuda/launchers.h"
#include "adamant/kernels/cuda/model_launchers_pointwise.h"
#include "adamant/kernels/cuda/workspace_resources.h"
#include "adamant/kernels/dispatch.h"

namespace adamant::kernels::cuda {

WorkspaceResources::WorkspaceResources(Device device, const WorkspaceNeeds& needs) {
  if (needs.matmul) matmul_ = std::make_unique<CublasLtContext>(device, needs.matmul_algorithms);
  if (needs.layernorm_rows > 0 && needs.layernorm_cols > 0) {
    const auto floats = launchers::layernorm_backward_workspace_floats(needs.layernorm_rows, needs.layernorm_cols);
    column_sums_ = Buffer(static_cast<std::size_t>(floats) * sizeof(float), device);
  }
  if (needs.squared_norm) partials_ = Buffer(launchers::kMaxSquaredNormPartials * sizeof(double), device);
  if (needs.attention_statistics_bytes > 0) attention_statistics_ = Buffer(needs.attention_statistics_bytes, device);
  if (needs.attention_scores_bytes > 0) attention_scores_ = Buffer(needs.attention_scores_bytes, device);
}

void* attention_statistics_of(WorkspaceResources& resources) { return resources.attention_statistics(); }
void* attention_scores_of(WorkspaceResources& resources) { return resources.attention_scores(); }

WorkspaceResources* make_workspace_resources(Device device, const WorkspaceNeeds& needs) {
  const CurrentDevice current(device);
  return new WorkspaceResources(device, needs);
}

void WorkspaceResourcesDeleter::operator()(WorkspaceResources* resources) const noexcept { delete resources; }

}  // namespace adamant::kernels::cuda
