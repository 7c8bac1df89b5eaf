#ifndef ADAMANT_HAVE_CUDA
// A build without CUDA: recorded matmul algorithms are read and written (matmul_algorithms.cpp),
// but there is no GPU to time or use them on.
#include "adamant/core/error.h"
#include "adamant/kernels/matmul_algorithms.h"
#include "adamant/kernels/workspace.h"

namespace adamant::kernels {

MatmulTarget matmul_target(const Workspace& workspace) {
  fail("matmul algorithms on {}: this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON",
       workspace.device().str());
}

std::vector<MatmulAlgorithmRecord> tune_matmul_algorithms(Workspace& workspace, const MatmulTuningOptions&) {
  fail("tuning matmul algorithms on {}: this build has no CUDA support; reconfigure with -DADAMANT_CUDA=ON",
       workspace.device().str());
}

}  // namespace adamant::kernels
#endif
