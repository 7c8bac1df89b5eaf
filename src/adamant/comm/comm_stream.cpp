#include "adamant/comm/comm_stream.h"

#include "adamant/core/error.h"

namespace adamant::comm {

namespace {

// Waiting for a reused event is never too early: a later record of the same
// event happens after this collective on the same stream, so at worst the
// waiter waits a little longer.
class EventHandle final : public CommHandle::Impl {
 public:
  EventHandle(std::shared_ptr<const void> owner, const Event& event) : owner_(std::move(owner)), event_(event) {}
  void wait(const Stream& stream) override {
    if (stream.device().is_cpu()) {
      event_.synchronize();  // the host is the waiter
    } else {
      event_.wait_on(stream);
    }
  }

 private:
  std::shared_ptr<const void> owner_;
  const Event& event_;
};

}  // namespace

CommStream::CommStream(Device device, std::size_t event_count)
    : stream_(device.is_cpu() ? Stream() : Stream(device)), after_event_(device), ring_(std::make_shared<EventRing>()) {
  ADAMANT_CHECK(event_count > 0, "CommStream needs at least one event");
  if (device.is_cpu()) return;
  ring_->events.reserve(event_count);
  for (std::size_t i = 0; i < event_count; ++i) ring_->events.emplace_back(device);
}

void CommStream::order_after(const Stream& after) {
  // A CPU stream has no enqueued work: the host already ran it in program order.
  if (device().is_cpu() || after.device().is_cpu()) return;
  after_event_.record(after);
  after_event_.wait_on(stream_);
}

CommHandle CommStream::completion_handle() {
  if (device().is_cpu()) return CommHandle();
  Event& event = ring_->events[ring_->next];
  ring_->next = (ring_->next + 1) % ring_->events.size();
  event.record(stream_);
  return CommHandle(std::make_unique<EventHandle>(ring_, event));
}

}  // namespace adamant::comm
