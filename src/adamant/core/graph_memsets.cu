// Memset nodes of a recorded graph as kernel nodes (graph_memsets.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "adamant/core/graph_memsets.h"

namespace adamant {

namespace {

constexpr int kFillThreads = 256;
constexpr unsigned kMaxFillBlocks = 1024;

// height rows of width units of unit bytes (1, 2, 4 or 16), pitch bytes apart, each unit
// set to `pattern` (its low unit bytes; a 16-byte unit holds it four times): what a
// cudaMemset2D writes, in the widest stores its alignment allows.
__global__ void __launch_bounds__(kFillThreads)
    fill_rows_kernel(unsigned char* dst, std::size_t pitch, std::uint32_t pattern, unsigned unit, std::size_t width,
                     std::size_t height) {
  const std::size_t total = width * height;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kFillThreads;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kFillThreads) + threadIdx.x; i < total; i += stride) {
    unsigned char* at = dst + (i / width) * pitch + (i % width) * unit;
    if (unit == 16) {
      *reinterpret_cast<uint4*>(at) = make_uint4(pattern, pattern, pattern, pattern);
    } else if (unit == 4) {
      *reinterpret_cast<std::uint32_t*>(at) = pattern;
    } else if (unit == 2) {
      *reinterpret_cast<std::uint16_t*>(at) = static_cast<std::uint16_t>(pattern);
    } else {
      *at = static_cast<unsigned char>(pattern);
    }
  }
}

// A memset as rows of the widest units its alignment allows.
struct FillRows {
  unsigned char* dst;
  std::size_t pitch;
  std::uint32_t pattern;
  unsigned unit;
  std::size_t width;
  std::size_t height;
};

FillRows fill_rows_of(const cudaMemsetParams& memset) {
  const std::size_t row_bytes = memset.width * memset.elementSize;
  std::uint32_t pattern = memset.value;
  if (memset.elementSize == 1) pattern = (pattern & 0xffu) * 0x01010101u;
  if (memset.elementSize == 2) pattern = (pattern & 0xffffu) * 0x00010001u;
  FillRows rows{static_cast<unsigned char*>(memset.dst),
                memset.height > 1 ? memset.pitch : row_bytes,
                pattern,
                memset.elementSize,
                memset.width,
                memset.height};
  const auto aligned = [&](std::size_t unit) {
    return reinterpret_cast<std::uintptr_t>(rows.dst) % unit == 0 && rows.pitch % unit == 0 && row_bytes % unit == 0;
  };
  for (const unsigned unit : {16u, 4u}) {
    if (unit > rows.unit && aligned(unit)) {
      rows.unit = unit;
      rows.width = row_bytes / unit;
      break;
    }
  }
  return rows;
}

// The nodes `node` depends on (dependents: false) or that depend on it (true).
cudaError_t neighbours(cudaGraphNode_t node, bool dependents, std::vector<cudaGraphNode_t>& out) {
  std::size_t count = 0;
  cudaError_t status = dependents ? cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &count)
                                  : cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count);
  if (status != cudaSuccess) return status;
  out.resize(count);
  if (count == 0) return cudaSuccess;
  return dependents ? cudaGraphNodeGetDependentNodes(node, out.data(), nullptr, &count)
                    : cudaGraphNodeGetDependencies(node, out.data(), nullptr, &count);
}

cudaError_t replace(cudaGraph_t graph, cudaGraphNode_t memset_node) {
  cudaMemsetParams memset{};
  cudaError_t status = cudaGraphMemsetNodeGetParams(memset_node, &memset);
  if (status != cudaSuccess) return status;
  if (memset.elementSize != 1 && memset.elementSize != 2 && memset.elementSize != 4) return cudaErrorInvalidValue;
  std::vector<cudaGraphNode_t> before, after;
  if ((status = neighbours(memset_node, false, before)) != cudaSuccess) return status;
  if ((status = neighbours(memset_node, true, after)) != cudaSuccess) return status;

  FillRows rows = fill_rows_of(memset);
  void* arguments[] = {&rows.dst, &rows.pitch, &rows.pattern, &rows.unit, &rows.width, &rows.height};
  const std::size_t total = rows.width * rows.height;
  cudaKernelNodeParams kernel{};
  kernel.func = reinterpret_cast<void*>(fill_rows_kernel);
  kernel.gridDim = dim3(static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(kMaxFillBlocks, (total + kFillThreads - 1) / kFillThreads))));
  kernel.blockDim = dim3(kFillThreads);
  kernel.sharedMemBytes = 0;
  kernel.kernelParams = arguments;
  kernel.extra = nullptr;
  cudaGraphNode_t fill = nullptr;
  status = cudaGraphAddKernelNode(&fill, graph, before.data(), before.size(), &kernel);
  if (status != cudaSuccess) return status;
  for (cudaGraphNode_t dependent : after) {
    if ((status = cudaGraphAddDependencies(graph, &fill, &dependent, nullptr, 1)) != cudaSuccess) return status;
  }
  return cudaGraphDestroyNode(memset_node);  // and its edges
}

}  // namespace

cudaError_t replace_memsets_with_kernels(cudaGraph_t graph) {
  std::size_t count = 0;
  cudaError_t status = cudaGraphGetNodes(graph, nullptr, &count);
  if (status != cudaSuccess || count == 0) return status;
  std::vector<cudaGraphNode_t> nodes(count);
  if ((status = cudaGraphGetNodes(graph, nodes.data(), &count)) != cudaSuccess) return status;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    if ((status = cudaGraphNodeGetType(node, &type)) != cudaSuccess) return status;
    if (type != cudaGraphNodeTypeMemset) continue;
    if ((status = replace(graph, node)) != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace adamant
