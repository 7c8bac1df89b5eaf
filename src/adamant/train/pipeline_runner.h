#pragma once
// One pipeline stage's share of a training step: the passes pipeline_schedule() lists for it,
// each chunk's input received from the previous virtual stage and its output sent to the
// next, the gradients travelling back the same way. With one stage it is the plain loop over
// micro-batches (forward, backward, forward, ...), so every run takes this path.
//
// Activations and their gradients travel on two communicators of the pipeline group (one for
// each direction of travel in the model), so the messages between two ranks pair up in the order
// both sides run their passes: every stage runs the forwards, and the backwards, of the
// (micro-batch, chunk) pairs in the same order. Sends are asynchronous; a send's buffer is
// the pass's own activation slot, waited for only before the slot is used again.
//
// The tied word embedding: after the last backward, its gradient on the first stage and its
// copy's on the last are summed over the embedding group; only then is it reported ready.
#include <span>
#include <vector>

#include "adamant/comm/communicator.h"
#include "adamant/model/gpt_model.h"
#include "adamant/train/pipeline_schedule.h"

namespace adamant::train {

struct PipelineComms {
  comm::Communicator* activations = nullptr;  // the pipeline group (null with one stage)
  comm::Communicator* gradients = nullptr;    // another communicator of the same group
  comm::Communicator* embedding = nullptr;    // first and last stage (null with one stage)
};

class PipelineRunner {
 public:
  // The model must have been built for this stage with passes_in_flight >= peak_passes_in_flight(layout, stage).
  PipelineRunner(model::GptModel& model, const PipelineComms& comms, int micro_batches);

  const PipelineLayout& layout() const { return layout_; }

  // Forward and backward of this data-parallel rank's micro-batches (micro_batches of them), the
  // step's gradients in model.grads() (the ones held before are dropped); on_grad_ready is called once per parameter
  // when its gradient is final. on_weight_needed, when set, waits for each pending parameter right before the step's
  // first read of its weights: by each chunk's first forward, and for all of the stage's parameters before the
  // first backward (which reads the ones no forward does: a tied word embedding's copy). It does not wait for the
  // losses to reach the host; take_loss_sum() reads them.
  void train_step(std::span<const model::MicroBatch> batches, float loss_scale, const model::GradReadyFn& on_grad_ready,
                  const model::WeightNeeds& on_weight_needed = {});
  // The sum of the last train_step's micro-batch losses on the last stage, 0 on the others. Waits
  // for the GPU to finish that step's backward passes: call it after issuing the optimizer's step.
  double take_loss_sum() { return model_.take_loss_sum(); }
  // Forwards without dropout; the sum of the micro-batch losses on the last stage, 0 on the others.
  double evaluate(std::span<const model::MicroBatch> batches);

 private:
  int virtual_stage(int chunk) const { return chunk * layout_.stages + stage_; }
  bool first_virtual(int chunk) const { return virtual_stage(chunk) == 0; }
  bool last_virtual(int chunk) const { return virtual_stage(chunk) + 1 == layout_.stages * layout_.virtual_stages; }
  int next_stage() const { return (stage_ + 1) % layout_.stages; }
  int previous_stage() const { return (stage_ + layout_.stages - 1) % layout_.stages; }
  int take_slot();
  // Receives the chunk's input into the slot (after the slot's last send), runs the forward and
  // sends the output on.
  void forward(const model::MicroBatch& batch, int chunk, int slot, bool training,
               const model::WeightNeeds& on_weight_needed = {});
  void wait_all_sends();
  void sum_tied_embedding(const model::GradReadyFn& on_grad_ready);

  model::GptModel& model_;
  PipelineComms comms_;
  PipelineLayout layout_;
  int stage_;
  std::vector<PipelineStep> schedule_;
  std::vector<int> free_slots_;
  std::vector<int> slot_of_pass_;             // [micro-batch * chunks + chunk]
  std::vector<comm::CommHandle> slot_sends_;  // the send reading each slot, if any
  std::size_t tied_embedding_;  // this stage's word embedding when it is tied across stages, else kAbsentParam
};

}  // namespace adamant::train
