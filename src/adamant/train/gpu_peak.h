#pragma once
// A GPU's peak dense bf16 tensor-core throughput, from NVIDIA's datasheets (the figures
// without sparsity), for the model FLOPs utilisation (MFU) a run reports: `adamant train`'s
// progress line and metrics, `adamant bench`. Looked up by the product name the driver
// reports, so that a run on an A100 is not measured against an H200's peak.
#include <optional>
#include <string>
#include <string_view>

#include "adamant/core/device.h"

namespace adamant::train {

// FLOP/s per GPU, or none for a GPU not in the table (the run then reports TFLOP/s without
// an MFU; `adamant bench --peak-tflops` gives one). Names as cudaDeviceProp::name has them:
// "NVIDIA H200", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB".
std::optional<double> datasheet_bf16_flops(std::string_view device_name);

// What a run on `device` measures its model FLOPs against: on a GPU, its name and datasheet
// peak (0 where the table has none); on the CPU nothing (per_gpu false: no FLOP/s or MFU is
// reported, a CPU having no datasheet figure of this kind).
struct FlopsReference {
  bool per_gpu = false;
  std::string gpu_name;
  double peak_flops = 0;
};
FlopsReference flops_reference(const Device& device);

}  // namespace adamant::train
