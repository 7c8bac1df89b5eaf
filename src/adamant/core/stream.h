#pragma once
// Streams and events. On the CPU they are no-ops (work runs in program order),
// so orchestration code uses them unconditionally and stays backend-agnostic.
#include "adamant/core/device.h"

namespace adamant {

class Stream {
 public:
  Stream() = default;              // the CPU stream
  explicit Stream(Device device);  // a new non-blocking CUDA stream on a GPU device
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  void* handle() const { return handle_; }  // cudaStream_t on CUDA, nullptr on CPU
  void synchronize() const;

 private:
  Device device_{};
  void* handle_ = nullptr;
};

class Event {
 public:
  Event() = default;
  explicit Event(Device device);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void wait_on(const Stream& stream) const;  // `stream` waits until this event has happened
  void synchronize() const;
  float elapsed_ms_since(const Event& start) const;  // CUDA only

 private:
  Device device_{};
  void* handle_ = nullptr;
};

}  // namespace adamant
