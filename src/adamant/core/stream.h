#pragma once
// Streams and events. On the CPU they are no-ops (work runs in program order),
// so orchestration code uses them unconditionally and stays backend-agnostic.
// A CPU event only notes the host time of its record(), so timing between two
// events reads the same on both backends.
#include <chrono>

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

  Device device() const { return device_; }
  void record(const Stream& stream);
  void wait_on(const Stream& stream) const;  // `stream` waits until this event has happened
  void synchronize() const;
  // True once the work recorded before it has run (never blocks). A CPU event is always done.
  bool done() const;
  // Milliseconds from `start`'s record to this one's, both done and on the same device: GPU time
  // between the two points of the stream on CUDA, host time between the record() calls on the CPU.
  float elapsed_ms_since(const Event& start) const;

 private:
  Device device_{};
  void* handle_ = nullptr;
  std::chrono::steady_clock::time_point host_recorded_at_{};  // CPU events
};

}  // namespace adamant
