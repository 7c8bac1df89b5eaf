#pragma once
// Replays the kernels of a repeated step without launching each again: on a GPU the
// second run() records the work into a CUDA graph and every later run() launches the
// graph (one launch instead of hundreds); the first runs the work directly, so that
// lazily created state (GEMM plans, workspaces) exists before the recording. On the
// CPU, or when the GPU cannot record the work, run() just calls it.
//
// The work must issue its kernels on the graph's stream only, in the same order with the
// same arguments every time (inputs change through the memory they point to), and must
// neither synchronise with the host nor allocate.
#include <functional>

#include "adamant/core/stream.h"

namespace adamant {

class StepGraph {
 public:
  explicit StepGraph(const Stream& stream) : stream_(&stream) {}
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void run(const std::function<void()>& work);
  bool recorded() const { return executable_ != nullptr; }

 private:
  const Stream* stream_;
  int direct_runs_ = 0;
  bool unrecordable_ = false;
  void* executable_ = nullptr;  // cudaGraphExec_t
};

namespace cuda {
// Records what `work` issues on `stream` into an executable graph; nullptr when the stream
// could not be recorded (the work then has not run).
void* record_graph(void* stream, const std::function<void()>& work);
void launch_graph(void* executable, void* stream);
void destroy_graph(void* executable) noexcept;
}  // namespace cuda

}  // namespace adamant
