#ifndef ADAMANT_HAVE_CUDA
// A build without CUDA: CPU workspaces hold nothing, and GPU ones cannot be made.
#include "adamant/core/error.h"
#include "adamant/kernels/workspace.h"

namespace adamant::kernels::cuda {

WorkspaceResources* make_workspace_resources(Device device, const WorkspaceNeeds&) {
  fail("Workspace on {}: this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON or run on the CPU",
       device.str());
}

void* attention_statistics_of(WorkspaceResources&) { return nullptr; }  // never given one
void* attention_scores_of(WorkspaceResources&) { return nullptr; }      // never given one

void WorkspaceResourcesDeleter::operator()(WorkspaceResources*) const noexcept {}  // never given one

}  // namespace adamant::kernels::cuda
#endif
