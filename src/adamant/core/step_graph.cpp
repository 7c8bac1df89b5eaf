#include "adamant/core/step_graph.h"

namespace adamant {

StepGraph::~StepGraph() {
  if (executable_ != nullptr) cuda::destroy_graph(executable_);
}

void StepGraph::run(const std::function<void()>& work) {
  if (stream_->device().is_cpu() || unrecordable_) {
    work();
    return;
  }
  if (executable_ == nullptr) {
    if (direct_runs_++ == 0) {
      work();
      return;
    }
    executable_ = cuda::record_graph(stream_->handle(), work);
    if (executable_ == nullptr) {
      unrecordable_ = true;
      work();
      return;
    }
  }
  cuda::launch_graph(executable_, stream_->handle());
}

}  // namespace adamant
