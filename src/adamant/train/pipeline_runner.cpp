#include "adamant/train/pipeline_runner.h"

#include "adamant/core/error.h"
#include "adamant/model/param_layout.h"

namespace adamant::train {

PipelineRunner::PipelineRunner(model::GptModel& model, const PipelineComms& comms, int micro_batches)
    : model_(model),
      comms_(comms),
      layout_{model.stage().stages, model.config().virtual_pipeline_size, micro_batches},
      stage_(model.stage().stage),
      schedule_(pipeline_schedule(layout_, stage_)),
      slot_sends_(static_cast<std::size_t>(model.passes_in_flight())),
      tied_embedding_(model.tied_embedding()) {
  const int needed = peak_passes_in_flight(layout_, stage_);
  ADAMANT_CHECK(model.passes_in_flight() >= needed,
                "PipelineRunner: stage {} holds up to {} micro-batches' activations in this schedule but the model "
                "was built for {}",
                stage_, needed, model.passes_in_flight());
  if (layout_.stages > 1) {
    ADAMANT_CHECK(comms.activations != nullptr && comms.gradients != nullptr && comms.embedding != nullptr &&
                      comms.activations->size() == layout_.stages && comms.gradients->size() == layout_.stages,
                  "PipelineRunner: {} stages need the pipeline group's communicators", layout_.stages);
  }
  for (int slot = model.passes_in_flight() - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  slot_of_pass_.assign(static_cast<std::size_t>(micro_batches * layout_.virtual_stages), -1);
}

int PipelineRunner::take_slot() {
  ADAMANT_CHECK(!free_slots_.empty(), "PipelineRunner: stage {} ran out of activation slots", stage_);
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  return slot;
}

void PipelineRunner::forward(const model::MicroBatch& batch, int chunk, int slot, bool training,
                             const model::WeightNeeds& on_weight_needed) {
  const Stream& stream = model_.stream();
  comm::CommHandle& send = slot_sends_[static_cast<std::size_t>(slot)];
  send.wait(stream);  // the slot's last send (a gradient) has left before its input is overwritten
  if (!first_virtual(chunk)) {
    comms_.activations->recv_async(model_.pass_input(slot, batch.batch_size), previous_stage()).wait(stream);
  }
  model_.forward_pass(chunk, slot, batch, training, on_weight_needed);
  if (!last_virtual(chunk)) {
    comms_.activations->order_after(stream);
    send = comms_.activations->send_async(model_.pass_output(slot, batch.batch_size), next_stage());
  }
}

void PipelineRunner::train_step(std::span<const model::MicroBatch> batches, float loss_scale,
                                const model::GradReadyFn& on_grad_ready, const model::WeightNeeds& on_weight_needed) {
  ADAMANT_CHECK(static_cast<int>(batches.size()) == layout_.micro_batches,
                "PipelineRunner: {} micro-batches for a schedule of {}", batches.size(), layout_.micro_batches);
  const Stream& stream = model_.stream();
  model_.discard_grads();  // each chunk's first backward writes the step's gradients: nothing zeroes them
  // The tied embedding is reported after its sum over the stages, below.
  const model::GradReadyFn hook = !on_grad_ready ? model::GradReadyFn{} : [&](std::size_t param) {
    if (param != tied_embedding_) on_grad_ready(param);
  };
  bool weights_pending = static_cast<bool>(on_weight_needed);
  for (const PipelineStep& step : schedule_) {
    const model::MicroBatch& batch = batches[static_cast<std::size_t>(step.micro_batch)];
    int& slot = slot_of_pass_[static_cast<std::size_t>(step.micro_batch * layout_.virtual_stages + step.chunk)];
    if (step.pass == PipelinePass::forward) {
      slot = take_slot();
      forward(batch, step.chunk, slot, true, step.micro_batch == 0 ? on_weight_needed : model::WeightNeeds{});
      continue;
    }
    if (weights_pending) {  // every weight is in place before the first backward reads any
      for (std::size_t param = 0; param < model_.params().size(); ++param) on_weight_needed.wait(param);
      weights_pending = false;
    }
    comm::CommHandle& send = slot_sends_[static_cast<std::size_t>(slot)];
    if (!last_virtual(step.chunk)) {
      comms_.gradients->recv_async(model_.output_grad(batch.batch_size), next_stage()).wait(stream);
    }
    send.wait(stream);  // the output's send: received by now, as its gradient came back
    const bool last_micro_batch = step.micro_batch + 1 == layout_.micro_batches;
    model_.backward_pass(step.chunk, slot, batch, loss_scale, last_micro_batch ? hook : model::GradReadyFn{});
    if (!first_virtual(step.chunk)) {
      comms_.gradients->order_after(stream);
      send = comms_.gradients->send_async(model_.input_grad(slot, batch.batch_size), previous_stage());
    }
    free_slots_.push_back(slot);
    slot = -1;
  }
  wait_all_sends();
  sum_tied_embedding(on_grad_ready);
}

double PipelineRunner::evaluate(std::span<const model::MicroBatch> batches) {
  double loss_sum = 0;
  const int slot = free_slots_.back();  // one micro-batch at a time: each slot is free between steps
  for (const model::MicroBatch& batch : batches) {
    for (int chunk = 0; chunk < layout_.virtual_stages; ++chunk) {
      forward(batch, chunk, slot, false);
      if (last_virtual(chunk)) loss_sum += model_.evaluate_loss(chunk, slot, batch);
    }
  }
  wait_all_sends();
  return loss_sum;
}

void PipelineRunner::wait_all_sends() {
  for (comm::CommHandle& send : slot_sends_) send.wait(model_.stream());
}

void PipelineRunner::sum_tied_embedding(const model::GradReadyFn& on_grad_ready) {
  if (tied_embedding_ == model::kAbsentParam) return;
  const ParamSpec& spec = model_.params()[tied_embedding_];
  comms_.embedding->order_after(model_.stream());
  comms_.embedding->all_reduce_async(model_.grads().slice(spec.offset, spec.numel), comm::ReduceOp::sum)
      .wait(model_.stream());
  if (on_grad_ready) on_grad_ready(tied_embedding_);
}

}  // namespace adamant::train
