#include "adamant/optim/comm_wait_timer.h"

namespace adamant::optim {

CommWaitTimer::Span CommWaitTimer::take_spare(Device device) {
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if (it->before.device() == device) {
      Span span = std::move(*it);
      spare_.erase(it);
      return span;
    }
  }
  return Span{Event(device), Event(device)};
}

double CommWaitTimer::take_done_ms() {
  double total = 0;
  // The spans are recorded in order on one stream: none after the first pending one is done.
  while (!recorded_.empty() && recorded_.front().after.done()) {
    total += recorded_.front().after.elapsed_ms_since(recorded_.front().before);
    spare_.push_back(std::move(recorded_.front()));
    recorded_.pop_front();
  }
  return total;
}

}  // namespace adamant::optim
