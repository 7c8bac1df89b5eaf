// CPU-only build: every CUDA entry point reports that CUDA is not compiled in.
#ifndef ADAMANT_HAVE_CUDA
#include "adamant/core/cuda_runtime.h"
#include "adamant/core/device.h"
#include "adamant/core/error.h"

namespace adamant::cuda {

namespace {
[[noreturn]] void no_cuda() {
  fail("this Adamant build has no CUDA support; rebuild with nvcc present (-DADAMANT_CUDA=ON)");
}
}  // namespace

void* malloc_zeroed(std::size_t, int) { no_cuda(); }
void free(void*, int) noexcept {}
void copy(void*, const void*, std::size_t) { no_cuda(); }
void* host_alloc_pinned(std::size_t) { no_cuda(); }
void host_free_pinned(void*) noexcept {}
void set_device(int) { no_cuda(); }
std::size_t device_memory_in_use(int) { no_cuda(); }
std::size_t device_memory_total(int) { no_cuda(); }
std::string device_name(int) { no_cuda(); }
int device_count() { return 0; }

}  // namespace adamant::cuda

namespace adamant {
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
}  // namespace adamant
#endif
