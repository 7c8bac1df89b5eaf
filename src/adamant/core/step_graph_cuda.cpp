// CUDA graphs for StepGraph: stream capture, memset nodes rewritten as kernels
// (graph_memsets.h), instantiation.
#include <cuda_runtime.h>

#include <cstddef>

#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/core/graph_memsets.h"
#include "adamant/core/step_graph.h"

namespace adamant {

namespace {

class CudaGraphRecorder final : public GraphRecorder {
 public:
  bool begin(void* stream) override {
    // Thread-local mode: a call of this thread that would break the recording (a host
    // synchronisation, an allocation) fails instead of waiting on work that is not running.
    if (cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();  // clear it: the caller runs the work directly instead
      return false;
    }
    return true;
  }

  void* end(void* stream) override {
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
    if (ended != cudaSuccess || graph == nullptr) {
      cudaGetLastError();
      fail(
          "recording a CUDA graph failed ({}): the recorded work did something a graph cannot hold, such as a host "
          "synchronisation or an allocation",
          cudaGetErrorString(ended));
    }
    std::size_t nodes = 0;
    cudaError_t status = cudaGraphGetNodes(graph, nullptr, &nodes);
    if (status == cudaSuccess && nodes > 0) status = replace_memsets_with_kernels(graph);
    cudaGraphExec_t executable = nullptr;
    if (status == cudaSuccess && nodes > 0) status = cudaGraphInstantiate(&executable, graph, 0);
    cudaGraphDestroy(graph);
    if (status != cudaSuccess) {
      cudaGetLastError();
      fail("preparing a recorded CUDA graph (its memsets as kernels, then instantiation) failed: {}",
           cudaGetErrorString(status));
    }
    return executable;  // nullptr when nothing was issued
  }

  void launch(void* graph, void* stream) override {
    ADAMANT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)));
  }

  void destroy(void* graph) noexcept override { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)); }
};

}  // namespace

GraphRecorder& cuda_graph_recorder() {
  static CudaGraphRecorder recorder;  // stateless
  return recorder;
}

}  // namespace adamant
