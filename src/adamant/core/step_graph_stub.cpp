// CPU-only build: StepGraph never records on the CPU, so these are unreachable.
#ifndef ADAMANT_HAVE_CUDA
#include "adamant/core/error.h"
#include "adamant/core/step_graph.h"

namespace adamant::cuda {

void* record_graph(void*, const std::function<void()>&) { return nullptr; }
void launch_graph(void*, void*) { fail("this Adamant build has no CUDA support; CUDA graphs are unavailable"); }
void destroy_graph(void*) noexcept {}

}  // namespace adamant::cuda
#endif
