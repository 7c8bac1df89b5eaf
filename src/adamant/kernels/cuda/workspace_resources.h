#pragma once
// What a GPU kernels::Workspace holds (kernels/workspace.h), all made when the workspace
// is. Only for host files compiled in CUDA builds.
#include <memory>

#include "adamant/core/buffer.h"
#include "adamant/kernels/cuda/cublaslt_context.h"
#include "adamant/kernels/workspace.h"

namespace adamant::kernels::cuda {

class WorkspaceResources {
 public:
  // The caller has made `device` current.
  WorkspaceResources(Device device, const WorkspaceNeeds& needs);

  // The dispatchers have checked that the workspace was made with what they ask for.
  CublasLtContext& matmul() { return *matmul_; }
  float* layernorm_column_sums() { return static_cast<float*>(column_sums_.data()); }
  double* squared_norm_partials() { return static_cast<double*>(partials_.data()); }
  void* attention_statistics() { return attention_statistics_.data(); }
  void* attention_scores() { return attention_scores_.data(); }

 private:
  std::unique_ptr<CublasLtContext> matmul_;
  Buffer column_sums_;
  Buffer partials_;
  Buffer attention_statistics_;
  Buffer attention_scores_;
};

}  // namespace adamant::kernels::cuda
