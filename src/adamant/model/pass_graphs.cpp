#include "adamant/model/pass_graphs.h"

#include "adamant/core/error.h"

namespace adamant::model {

PassGraphs::PassGraphs(const Stream& stream, int chunks, int slots)
    : stream_(&stream), chunks_(chunks), slots_(slots), entries_(static_cast<std::size_t>(chunks * slots * 2)) {
  ADAMANT_CHECK(chunks >= 1 && slots >= 1, "PassGraphs: {} chunk(s) and {} slot(s); a model has at least one of each",
                chunks, slots);
}

PassGraphs::Entry& PassGraphs::entry(int chunk, int slot, PassDirection direction) {
  ADAMANT_CHECK(chunk >= 0 && chunk < chunks_ && slot >= 0 && slot < slots_,
                "PassGraphs: pass of chunk {} in slot {}; the model holds {} chunk(s) and {} slot(s)", chunk, slot,
                chunks_, slots_);
  const int index = (chunk * slots_ + slot) * 2 + (direction == PassDirection::backward ? 1 : 0);
  return entries_[static_cast<std::size_t>(index)];
}

void PassGraphs::run(int chunk, int slot, PassDirection direction, const PassSignature& signature,
                     const std::function<void()>& work) {
  if (!enabled()) {
    work();
    return;
  }
  Entry& e = entry(chunk, slot, direction);
  if (e.graph == nullptr || !(e.signature == signature)) {
    e.graph = std::make_unique<StepGraph>(*stream_);
    e.signature = signature;
  }
  e.graph->run(work);
}

int PassGraphs::recorded() const {
  int count = 0;
  for (const Entry& e : entries_) count += e.graph != nullptr && e.graph->recorded() ? 1 : 0;
  return count;
}

}  // namespace adamant::model
