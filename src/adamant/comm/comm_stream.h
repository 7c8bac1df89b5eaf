#pragma once
// The stream a device backend issues its collectives on, plus the events that
// let other streams (or the host) wait for them. On the CPU everything runs in
// program order, so ordering is a no-op and handles are already complete.
#include <cstddef>
#include <memory>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/core/stream.h"

namespace adamant::comm {

class CommStream {
 public:
  // `event_count` events are created once and reused in turn, so issuing a
  // collective never creates CUDA objects.
  // The default covers the collectives of a whole step (one per bucket and kind, so a
  // handle never waits on a later collective's event) for buckets down to a few MiB.
  explicit CommStream(Device device, std::size_t event_count = 1024);

  Device device() const { return stream_.device(); }
  const Stream& stream() const { return stream_; }

  // Work issued on stream() from now on starts after the work already enqueued on `after`.
  void order_after(const Stream& after);

  // A handle for everything enqueued on stream() so far.
  CommHandle completion_handle();

 private:
  // Shared with handles so that a handle outliving its communicator stays valid.
  struct EventRing {
    std::vector<Event> events;
    std::size_t next = 0;
  };

  Stream stream_;
  Event after_event_;
  std::shared_ptr<EventRing> ring_;
};

// Copies `bytes` from src to dst in the order of `stream`: memcpy on the CPU
// stream, an asynchronous cudaMemcpy on a CUDA stream.
void copy_bytes_on_stream(void* dst, const void* src, std::size_t bytes, const Stream& stream);

}  // namespace adamant::comm
