#pragma once
// Replays the kernels of a repeated step without launching each again: on a GPU the
// second run() records the work into CUDA graphs and every later run() launches them
// (a few launches instead of hundreds); the first runs the work directly, so that
// lazily created state (GEMM plans, workspaces) exists before the recording. On the
// CPU, or when the GPU cannot record the work, run() just calls it.
//
// The work must issue its kernels on the graph's stream only, in the same order with the
// same arguments every time (inputs change through the memory they point to), and must
// neither synchronise with the host nor allocate.
//
// Pauses. Where the host must act between the kernels (start a collective on another
// stream once the kernels before it are done), the work calls pause(); the host's part is
// on_pause(k), k counting the pauses of one run from 0. A direct run calls it at once. A
// recording ends the current graph there, launches it, calls on_pause(k) outside the
// recording and records what follows as the next graph; a replay launches the graphs in
// turn, each followed by the pauses that ended it. Pauses with no kernel between them end
// one graph, so a replay issues the same work and calls on_pause in the same places as a
// direct run, with the graphs' launches in between.
#include <functional>
#include <vector>

#include "adamant/core/stream.h"

namespace adamant {

// What recording needs from a device: CUDA's stream capture (cuda_graph_recorder()), or a
// stand-in that tests drive.
class GraphRecorder {
 public:
  virtual ~GraphRecorder() = default;
  // Starts recording what is issued on `stream`; false when the stream cannot be recorded.
  virtual bool begin(void* stream) = 0;
  // Ends the recording: the executable graph of what was issued since begin(), or nullptr when
  // nothing was. Throws when the recording failed (the recorded work has not run).
  virtual void* end(void* stream) = 0;
  virtual void launch(void* graph, void* stream) = 0;
  virtual void destroy(void* graph) noexcept = 0;
};

class StepGraph {
 public:
  using Pause = std::function<void()>;
  using Work = std::function<void(const Pause& pause)>;
  using OnPause = std::function<void(int pause)>;

  explicit StepGraph(const Stream& stream);
  // Records through `recorder` on `stream` (a handle it understands), whatever the device.
  StepGraph(GraphRecorder& recorder, void* stream) : recorder_(&recorder), stream_(stream) {}
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void run(const Work& work, const OnPause& on_pause = {});
  void run(const std::function<void()>& work) {
    run([&work](const Pause&) { work(); });
  }
  // The work as a direct run does it: every pause calls on_pause at once.
  static void run_directly(const Work& work, const OnPause& on_pause);
  bool recorded() const { return !segments_.empty(); }
  // Graphs a replay launches (0 before the recording).
  int graphs() const;

 private:
  struct Segment {
    void* graph = nullptr;  // nullptr: pauses before the first kernel
    int pauses = 0;         // that follow the graph
  };
  // Records and launches the work, segment by segment; false (nothing ran) when the stream
  // cannot be recorded.
  bool record(const Work& work, const OnPause& on_pause);
  void release() noexcept;

  GraphRecorder* recorder_ = nullptr;  // nullptr: every run is direct (the CPU)
  void* stream_ = nullptr;
  int direct_runs_ = 0;
  bool unrecordable_ = false;
  std::vector<Segment> segments_;
};

// Stream capture into CUDA graphs (core/step_graph_cuda.cpp); a build without CUDA has none.
GraphRecorder& cuda_graph_recorder();

}  // namespace adamant
