#pragma once
// The recorded training passes of a GptModel (model.enable_cuda_graph): each chunk's forward
// and backward in each activation slot becomes a CUDA graph (core/step_graph.h), run directly
// the first time, recorded the second and replayed from then on, so that a pass costs one
// launch instead of hundreds.
//
// A graph replays its launches with the arguments they were recorded with. What changes from
// micro-batch to micro-batch lives in memory the launches read: the token ids, the targets and
// the first sample index that the dropout masks start from (kernels/dropout.h, sample_offset).
// What a recording fixes is its signature: the micro-batch size and the loss scale folded
// into the classifier's gradient. A pass of another signature is recorded anew (a short last
// micro-batch, a changed fp16 loss scale).
//
// A chunk's first backward of a step writes its gradients and the later ones add to them
// (GptModel::discard_grads): other GEMM epilogues and copies, so each is recorded apart.
//
// A backward that reports its finished gradients (to start their buckets' reduce-scatters
// during the backward) pauses after each (StepGraph's pauses): it is recorded as one graph per
// stretch between reports, and kept apart from the same pass without reports (the earlier
// micro-batches of a step), so that neither is recorded again for the other. A forward that
// reports the weights it needs (to wait for each bucket's all-gather right before its first
// use, the step's first micro-batch) pauses before each alike and is kept apart the same way.
#include <functional>
#include <memory>
#include <vector>

#include "adamant/core/step_graph.h"
#include "adamant/core/stream.h"

namespace adamant::model {

enum class PassKind {
  forward,
  backward_adding,   // adds the chunk's gradients to the ones held
  backward_writing,  // writes them (the chunk's first backward of a step)
};

struct PassSignature {
  int batch = 0;
  float loss_scale = 0.0f;
  bool operator==(const PassSignature&) const = default;
};

class PassGraphs {
 public:
  PassGraphs() = default;  // records nothing: every pass runs directly
  PassGraphs(const Stream& stream, int chunks, int slots);

  bool enabled() const { return stream_ != nullptr; }
  // Runs `work`, the kernels of one pass, issued on the stream only: directly, or by the pass's
  // graphs. With on_pause set the work's pauses call it (StepGraph::run), and the pass is recorded
  // apart from its runs without.
  void run(int chunk, int slot, PassKind kind, const PassSignature& signature, const StepGraph::Work& work,
           const StepGraph::OnPause& on_pause = {});
  // How many passes are held as recorded graphs (none on the CPU, where run() calls the work).
  int recorded() const;
  // How many graphs a replay of all of them launches.
  int graphs() const;

 private:
  struct Entry {
    std::unique_ptr<StepGraph> graph;
    PassSignature signature;
  };
  Entry& entry(int chunk, int slot, PassKind kind, bool pausing);

  const Stream* stream_ = nullptr;
  int chunks_ = 0;
  int slots_ = 0;
  std::vector<Entry> entries_;  // [chunk][slot][forward, then each backward kind; each without and with pauses]
};

}  // namespace adamant::model
