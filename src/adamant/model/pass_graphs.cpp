#include "adamant/model/pass_graphs.h"

#include "adamant/core/error.h"

namespace adamant::model {

namespace {
constexpr int kKinds = 6;  // forward, adding and writing backward, each without and with pauses
}  // namespace

PassGraphs::PassGraphs(const Stream& stream, int chunks, int slots)
    : stream_(&stream), chunks_(chunks), slots_(slots), entries_(static_cast<std::size_t>(chunks * slots * kKinds)) {
  ADAMANT_CHECK(chunks >= 1 && slots >= 1, "PassGraphs: {} chunk(s) and {} slot(s); a model has at least one of each",
                chunks, slots);
}

PassGraphs::Entry& PassGraphs::entry(int chunk, int slot, PassKind kind, bool pausing) {
  ADAMANT_CHECK(chunk >= 0 && chunk < chunks_ && slot >= 0 && slot < slots_,
                "PassGraphs: pass of chunk {} in slot {}; the model holds {} chunk(s) and {} slot(s)", chunk, slot,
                chunks_, slots_);
  const int first = kind == PassKind::forward ? 0 : (kind == PassKind::backward_adding ? 2 : 4);
  const int at = first + (pausing ? 1 : 0);
  const int index = (chunk * slots_ + slot) * kKinds + at;
  return entries_[static_cast<std::size_t>(index)];
}

void PassGraphs::run(int chunk, int slot, PassKind kind, const PassSignature& signature, const StepGraph::Work& work,
                     const StepGraph::OnPause& on_pause) {
  if (!enabled()) {
    StepGraph::run_directly(work, on_pause);
    return;
  }
  Entry& e = entry(chunk, slot, kind, static_cast<bool>(on_pause));
  if (e.graph == nullptr || !(e.signature == signature)) {
    e.graph = std::make_unique<StepGraph>(*stream_);
    e.signature = signature;
  }
  e.graph->run(work, on_pause);
}

int PassGraphs::recorded() const {
  int count = 0;
  for (const Entry& e : entries_) count += e.graph != nullptr && e.graph->recorded() ? 1 : 0;
  return count;
}

int PassGraphs::graphs() const {
  int count = 0;
  for (const Entry& e : entries_) count += e.graph != nullptr ? e.graph->graphs() : 0;
  return count;
}

}  // namespace adamant::model
