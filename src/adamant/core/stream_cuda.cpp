#include <cuda_runtime.h>

#include <utility>

#include "adamant/core/cuda_check.h"
#include "adamant/core/error.h"
#include "adamant/core/stream.h"

namespace adamant {

namespace {
cudaStream_t as_stream(void* h) { return static_cast<cudaStream_t>(h); }
cudaEvent_t as_event(void* h) { return static_cast<cudaEvent_t>(h); }
}  // namespace

Stream::Stream(Device device) : device_(device) {
  if (device.is_cpu()) return;
  ADAMANT_CUDA_CHECK(cudaSetDevice(device.index));
  cudaStream_t s = nullptr;
  ADAMANT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  handle_ = s;
}
Stream::~Stream() {
  if (handle_ != nullptr) cudaStreamDestroy(as_stream(handle_));
}
Stream::Stream(Stream&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}
Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudaStreamDestroy(as_stream(handle_));
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}
void Stream::synchronize() const {
  if (device_.is_cuda()) ADAMANT_CUDA_CHECK(cudaStreamSynchronize(as_stream(handle_)));
}

Event::Event(Device device) : device_(device) {
  if (device.is_cpu()) return;
  ADAMANT_CUDA_CHECK(cudaSetDevice(device.index));
  cudaEvent_t e = nullptr;
  ADAMANT_CUDA_CHECK(cudaEventCreate(&e));
  handle_ = e;
}
Event::~Event() {
  if (handle_ != nullptr) cudaEventDestroy(as_event(handle_));
}
Event::Event(Event&& other) noexcept
    : device_(other.device_),
      handle_(std::exchange(other.handle_, nullptr)),
      host_recorded_at_(other.host_recorded_at_) {}
Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudaEventDestroy(as_event(handle_));
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
    host_recorded_at_ = other.host_recorded_at_;
  }
  return *this;
}
void Event::record(const Stream& stream) {
  if (device_.is_cuda()) {
    ADAMANT_CUDA_CHECK(cudaEventRecord(as_event(handle_), as_stream(stream.handle())));
  } else {
    host_recorded_at_ = std::chrono::steady_clock::now();
  }
}
void Event::wait_on(const Stream& stream) const {
  if (device_.is_cuda()) ADAMANT_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream.handle()), as_event(handle_), 0));
}
void Event::synchronize() const {
  if (device_.is_cuda()) ADAMANT_CUDA_CHECK(cudaEventSynchronize(as_event(handle_)));
}
bool Event::done() const {
  if (device_.is_cpu()) return true;
  const cudaError_t status = cudaEventQuery(as_event(handle_));
  if (status == cudaErrorNotReady) {
    // Not an error, but the runtime may keep it as the last error, which the next kernel launch's
    // cudaGetLastError() check would then report; every earlier launch was checked already.
    cudaGetLastError();
    return false;
  }
  if (status != cudaSuccess) {
    fail("CUDA error {} ({}) in cudaEventQuery", static_cast<int>(status), cudaGetErrorString(status));
  }
  return true;
}
float Event::elapsed_ms_since(const Event& start) const {
  ADAMANT_CHECK(start.device_ == device_, "Event::elapsed_ms_since: events on {} and {}; time events of one device",
                start.device_.str(), device_.str());
  if (device_.is_cpu()) {
    return std::chrono::duration<float, std::milli>(host_recorded_at_ - start.host_recorded_at_).count();
  }
  float ms = 0;
  ADAMANT_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start.handle_), as_event(handle_)));
  return ms;
}

}  // namespace adamant
