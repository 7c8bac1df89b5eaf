#pragma once
// Exposed communication time: how long the compute stream stands idle in its
// waits on collectives (docs/distributed_fused_adam.md, "Exposed communication").
//
// Each wait is bracketed by two events recorded on the compute stream, one right
// before and one right after it. Nothing else is enqueued between them, so their
// distance is exactly the idle gap: GPU time on CUDA (the stream passes the first
// event when its earlier work is done and the second when the collective is), host
// time on the CPU, where the wait blocks the host. The same code times both.
#include <deque>
#include <utility>
#include <vector>

#include "adamant/core/stream.h"

namespace adamant::optim {

class CommWaitTimer {
 public:
  // Runs `wait` (stream waits on communication handles) between two events on `stream`.
  template <typename Wait>
  void time(const Stream& stream, Wait&& wait) {
    Span span = take_spare(stream.device());
    span.before.record(stream);
    std::forward<Wait>(wait)();
    span.after.record(stream);
    recorded_.push_back(std::move(span));
  }

  // Milliseconds of the waits timed since the last call whose events are done by now; waits the
  // stream has not passed yet stay for a later call. Never blocks the host.
  double take_done_ms();

 private:
  struct Span {
    Event before, after;
  };
  Span take_spare(Device device);

  std::deque<Span> recorded_;  // in stream order
  std::vector<Span> spare_;    // read already; reused so that steady steps create no events
};

}  // namespace adamant::optim
