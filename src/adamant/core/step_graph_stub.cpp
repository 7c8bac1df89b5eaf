// CPU-only build: StepGraph never records on the CPU, so this recorder is unreachable.
#ifndef ADAMANT_HAVE_CUDA
#include "adamant/core/error.h"
#include "adamant/core/step_graph.h"

namespace adamant {

namespace {

class NoGraphRecorder final : public GraphRecorder {
 public:
  bool begin(void*) override { return false; }
  void* end(void*) override { fail("this Adamant build has no CUDA support; CUDA graphs are unavailable"); }
  void launch(void*, void*) override { fail("this Adamant build has no CUDA support; CUDA graphs are unavailable"); }
  void destroy(void*) noexcept override {}
};

}  // namespace

GraphRecorder& cuda_graph_recorder() {
  static NoGraphRecorder recorder;  // stateless
  return recorder;
}

}  // namespace adamant
#endif
