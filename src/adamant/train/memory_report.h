#pragma once
// Peak memory per rank of a training run, in two measures:
//  - allocated: bytes Adamant itself holds on the run's device (every Buffer: weights, gradients, optimizer
//    state, activations, communication buffers, and the CUDA kernels' workspaces; core/memory_stats.h). This
//    is the figure to compare with PyTorch's torch.cuda.max_memory_allocated().
//  - device in use (GPU only): total - free from cudaMemGetInfo, which adds the CUDA context, NCCL's and
//    cuBLAS's own buffers (and anything else on that GPU), sampled after set-up and at the end of each step.
#include <string>

#include "adamant/comm/communicator.h"
#include "adamant/core/device.h"

namespace adamant::train {

struct RankSpread {
  double max = 0;  // bytes, over the ranks
  double min = 0;
};

struct MemoryReport {
  bool gpu = false;  // device_in_use is measured only on a GPU
  RankSpread allocated_peak;
  RankSpread device_in_use_peak;
};

class MemoryWatch {
 public:
  // Starts the run's allocation high-water mark at what is held now, after set-up (and after loading a
  // checkpoint, whose staging is not part of training), and samples the device memory in use.
  explicit MemoryWatch(Device device);

  void sample();  // at the end of a step: device memory in use (GPU)
  // This rank's peaks, max and min over `group` (collective).
  MemoryReport report(comm::Communicator& group) const;

 private:
  Device device_;
  double device_in_use_peak_ = 0;
};

// "allocated 13.50 GiB, device in use 15.10 GiB (cudaMemGetInfo)"; max and min over the ranks when they differ.
std::string format_memory(const MemoryReport& report);

}  // namespace adamant::train
