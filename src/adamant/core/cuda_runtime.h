#pragma once
// The few CUDA runtime calls that core/ needs, behind plain C++ so that the
// library compiles without CUDA headers. In a CPU-only build they throw.
#include <cstddef>
#include <string>

namespace adamant::cuda {

void* malloc_zeroed(std::size_t bytes, int device);
void free(void* ptr, int device) noexcept;
void copy(void* dst, const void* src, std::size_t bytes);  // cudaMemcpyDefault, synchronous
// Page-locked host memory, zeroed: what an asynchronous device-to-host copy lands in without
// making the host wait for the stream.
void* host_alloc_pinned(std::size_t bytes);
void host_free_pinned(void* ptr) noexcept;
void set_device(int device);
int device_count();  // 0 in a CPU-only build or with no GPU visible
// Device memory in use by every user of the GPU (total - free from cudaMemGetInfo): this process's
// allocations plus the CUDA context, NCCL's and cuBLAS's buffers, and other processes on the same GPU.
std::size_t device_memory_in_use(int device);
// The device's total memory (cudaMemGetInfo).
std::size_t device_memory_total(int device);
// The device's product name, as the driver reports it (cudaDeviceProp::name, e.g. "NVIDIA H200").
std::string device_name(int device);

}  // namespace adamant::cuda
