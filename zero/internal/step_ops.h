// The engine's per-step figures of its device's stream work (memory/
// stream_counts.h), so a budget can be held: "no host wait during a
// micro-batch, at most one in Step", "launches O(units)", "no driver call
// once warm". A window runs from one mark to the next: a micro-batch's from
// the end of the one before (or of the last Step) to its last gradient
// handed over, so it holds that micro-batch's forward and backward; Step's
// call from the last micro-batch's end to Step's return. Driven by the
// engine's one thread.
#pragma once

#include <functional>
#include <utility>

#include "memory/stream_counts.h"

namespace zero {

struct StepStreamOps {
  StreamOps step;             // the last step: its micro-batches and its Step call
  StreamOps max_micro_batch;  // the busiest of its micro-batches, per field
  StreamOps step_call;        // from its last micro-batch's end to Step's return
};

class StepOpsMeter {
 public:
  explicit StepOpsMeter(std::function<StreamOps()> read)
      : read_(std::move(read)), step_mark_(read_()), micro_batch_mark_(step_mark_) {}

  // A micro-batch's last gradient was handed over.
  void MicroBatchDone() {
    const StreamOps now = read_();
    max_micro_batch_ = Max(max_micro_batch_, now - micro_batch_mark_);
    micro_batch_mark_ = now;
  }
  // Step returned (applied or skipped): closes the step's windows.
  void StepDone() {
    const StreamOps now = read_();
    last_ = {.step = now - step_mark_,
             .max_micro_batch = max_micro_batch_,
             .step_call = now - micro_batch_mark_};
    step_mark_ = micro_batch_mark_ = now;
    max_micro_batch_ = {};
  }
  // Leaves work out of the open windows: what a caller asked for outside the
  // step (stats() reading a norm on the host).
  void Exclude(const StreamOps& ops) {
    step_mark_ = step_mark_ + ops;
    micro_batch_mark_ = micro_batch_mark_ + ops;
  }
  StreamOps Now() const { return read_(); }

  const StepStreamOps& last_step() const { return last_; }

 private:
  const std::function<StreamOps()> read_;
  StreamOps step_mark_;
  StreamOps micro_batch_mark_;
  StreamOps max_micro_batch_;
  StepStreamOps last_;
};

}  // namespace zero
