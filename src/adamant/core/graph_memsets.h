#pragma once
// Memsets in recorded CUDA graphs, rewritten as kernels. A memset node costs a few
// microseconds of idle GPU around it inside a graph (the step graphs hold one before
// many cuBLASLt products, which zero part of their workspace), where a kernel node
// that writes the same bytes costs well under one. Only for CUDA sources.
#include <cuda_runtime.h>

namespace adamant {

// Replaces every memset node of `graph` with a kernel node that writes the same bytes
// (the same rows, pitch, element size and value) and keeps its dependencies and
// dependents. Returns the first CUDA error; the graph may then be partly rewritten.
cudaError_t replace_memsets_with_kernels(cudaGraph_t graph);

}  // namespace adamant
