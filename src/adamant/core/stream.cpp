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
Event::Event(Event&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
  device_ = other.device_;
  handle_ = std::exchange(other.handle_, nullptr);
  return *this;
}
void Event::record(const Stream&) {}
void Event::wait_on(const Stream&) const {}
void Event::synchronize() const {}
float Event::elapsed_ms_since(const Event&) const { fail("Event timing needs a CUDA build"); }

}  // namespace adamant
#endif
