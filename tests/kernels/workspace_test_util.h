#pragma once
// A kernels::Workspace for kernel tests (kernels/workspace.h): everything a test may call,
// matrix products, layernorm backward up to 2^17 rows of 8,200 (one vector past the longest rows
// its row-held kernel takes), squared norms, and weight
// gradients added to of up to 2^20 elements (a 1,024 x 1,024 weight).
#include "adamant/kernels/workspace.h"

namespace adamant::testing {

inline kernels::WorkspaceNeeds all_workspace_needs() {
  kernels::WorkspaceNeeds needs;
  needs.matmul = true;
  needs.layernorm_rows = std::int64_t{1} << 17;
  needs.layernorm_cols = 8200;
  needs.squared_norm = true;
  needs.weight_grad_elements = std::int64_t{1} << 20;
  return needs;
}

}  // namespace adamant::testing
