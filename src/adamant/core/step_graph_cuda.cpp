// CUDA graphs for StepGraph.
#include <cuda_runtime.h>

#include "adamant/core/cuda_check.h"
#include "adamant/core/step_graph.h"

namespace adamant::cuda {

void* record_graph(void* stream, const std::function<void()>& work) {
  auto* handle = static_cast<cudaStream_t>(stream);
  if (cudaStreamBeginCapture(handle, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();  // clear it: the caller runs the work directly instead
    return nullptr;
  }
  cudaGraph_t graph = nullptr;
  try {
    work();
  } catch (...) {
    cudaStreamEndCapture(handle, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    return nullptr;
  }
  if (cudaStreamEndCapture(handle, &graph) != cudaSuccess || graph == nullptr) {
    cudaGetLastError();
    return nullptr;
  }
  cudaGraphExec_t executable = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&executable, graph, 0);
  cudaGraphDestroy(graph);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return executable;
}

void launch_graph(void* executable, void* stream) {
  ADAMANT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(executable), static_cast<cudaStream_t>(stream)));
}

void destroy_graph(void* executable) noexcept { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(executable)); }

}  // namespace adamant::cuda
