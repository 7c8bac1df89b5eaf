#include "adamant/core/step_graph.h"

#include <exception>

#include "adamant/core/error.h"

namespace adamant {

StepGraph::StepGraph(const Stream& stream)
    : recorder_(stream.device().is_cpu() ? nullptr : &cuda_graph_recorder()), stream_(stream.handle()) {}

StepGraph::~StepGraph() { release(); }

void StepGraph::release() noexcept {
  for (const Segment& segment : segments_) {
    if (segment.graph != nullptr) recorder_->destroy(segment.graph);
  }
  segments_.clear();
}

int StepGraph::graphs() const {
  int count = 0;
  for (const Segment& segment : segments_) count += segment.graph != nullptr ? 1 : 0;
  return count;
}

void StepGraph::run(const Work& work, const OnPause& on_pause) {
  if (recorder_ == nullptr || unrecordable_) {
    run_directly(work, on_pause);
    return;
  }
  if (segments_.empty()) {
    if (direct_runs_++ == 0) {
      run_directly(work, on_pause);
    } else if (!record(work, on_pause)) {
      unrecordable_ = true;
      run_directly(work, on_pause);
    }
    return;
  }
  int pause = 0;
  for (const Segment& segment : segments_) {
    if (segment.graph != nullptr) recorder_->launch(segment.graph, stream_);
    for (int i = 0; i < segment.pauses; ++i, ++pause) {
      if (on_pause) on_pause(pause);
    }
  }
}

void StepGraph::run_directly(const Work& work, const OnPause& on_pause) {
  int pause = 0;
  work([&] {
    if (on_pause) on_pause(pause);
    ++pause;
  });
}

bool StepGraph::record(const Work& work, const OnPause& on_pause) {
  if (!recorder_->begin(stream_)) return false;
  bool recording = true;
  int pause = 0;
  // Ends the open recording and launches what it holds; a pause before any kernel gets a
  // segment without a graph.
  auto close = [&] {
    recording = false;
    void* graph = recorder_->end(stream_);
    if (graph != nullptr) {
      segments_.push_back({graph, 0});
      recorder_->launch(graph, stream_);
    } else if (segments_.empty()) {
      segments_.push_back({});
    }
  };
  try {
    work([&] {
      close();
      segments_.back().pauses += 1;
      if (on_pause) on_pause(pause);
      ++pause;
      ADAMANT_CHECK(recorder_->begin(stream_),
                    "StepGraph: the stream could not be recorded again after pause {} (the graphs before it have run)",
                    pause - 1);
      recording = true;
    });
    close();
  } catch (...) {
    // The step is cut short: end an open recording without running it and drop every graph.
    unrecordable_ = true;
    if (recording) {
      try {
        void* graph = recorder_->end(stream_);
        if (graph != nullptr) recorder_->destroy(graph);
      } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
      }
    }
    release();
    throw;
  }
  return true;
}

}  // namespace adamant
