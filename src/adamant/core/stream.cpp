#ifndef ADAMANT_HAVE_CUDA
#include "adamant/core/stream.h"

#include <utility>

#include "adamant/core/error.h"

namespace adamant {

Stream::Stream(Device device) : device_(device) {
  ADAMANT_CHECK(device.is_cpu(), "Stream on {}: this build has no CUDA support", device.str());
}
Stream::~Stream() = default;
Stream::Stream(Stream&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}
Stream& Stream::operator=(Stream&& other) noexcept {
  device_ = other.device_;
  handle_ = std::exchange(other.handle_, nullptr);
  return *this;
}
void Stream::synchronize() const {}

Event::Event(Device device) : device_(device) {
  ADAMANT_CHECK(device.is_cpu(), "Event on {}: this build has no CUDA support", device.str());
}
Event::~Event() = default;
Event::Event(Event&& other) noexcept
    : device_(other.device_),
      handle_(std::exchange(other.handle_, nullptr)),
      host_recorded_at_(other.host_recorded_at_) {}
Event& Event::operator=(Event&& other) noexcept {
  device_ = other.device_;
  handle_ = std::exchange(other.handle_, nullptr);
  host_recorded_at_ = other.host_recorded_at_;
  return *this;
}
void Event::record(const Stream&) { host_recorded_at_ = std::chrono::steady_clock::now(); }
void Event::wait_on(const Stream&) const {}
void Event::synchronize() const {}
bool Event::done() const { return true; }
float Event::elapsed_ms_since(const Event& start) const {
  return std::chrono::duration<float, std::milli>(host_recorded_at_ - start.host_recorded_at_).count();
}

}  // namespace adamant
#endif
