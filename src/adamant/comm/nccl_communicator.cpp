// CPU-only builds: the NCCL backend is nccl_communicator_cuda.cpp.
#ifndef ADAMANT_HAVE_CUDA
#include "adamant/comm/nccl_communicator.h"

#include "adamant/core/error.h"

namespace adamant::comm {

std::unique_ptr<Communicator> make_nccl_communicator(const MpiCommunicator& bootstrap, Device device) {
  fail(
      "NCCL communicator for {} over {} ranks: this build has no CUDA/NCCL support; reconfigure with "
      "-DADAMANT_CUDA=ON on a machine with nvcc and NCCL, or use CPU buffers",
      device.str(), bootstrap.size());
}

}  // namespace adamant::comm
#endif
