// The gradient side of one rank's engine: stages what backward hands over,
// reduces each unit across ranks (reduce-scatter, or all-reduce at stage 0)
// as soon as it and every later unit are complete, and accumulates
// micro-batches in order into the reduced gradients of ModelStates. Units
// reduce strictly from the last to the first, so every rank issues the
// same collectives in the same order whatever order gradients come in.
// Gradients are written on ctx.stream; reductions and what reads their
// results run on ctx.comm_stream after an event, so they overlap the rest
// of backward. The engine orders its stream after comm_stream before Step.
// Driven by the engine's thread; errors are returned, the engine aborts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "zero/buffer.h"
#include "zero/internal/model_states.h"
#include "zero/internal/rank_context.h"

namespace zero {

class GradientReducer {
 public:
  // Runs after each unit's reduction is enqueued on ctx.comm_stream (the
  // engine's early CPU steps, which must wait for that stream).
  using OnReduced = std::function<absl::Status(int unit)>;

  GradientReducer(const RankContext& ctx, ModelStates& states, OnReduced on_reduced);

  // `step` below is the step being accumulated (for messages).
  // In place: where this micro-batch's gradient of `id` is to be written
  // (its staging bucket), then Written once work before `written` (null:
  // before the call, on ctx.stream) wrote it. No host wait.
  absl::StatusOr<char*> Slot(int id, int64_t step);
  absl::Status Written(int id, const std::shared_ptr<Event>& written, int64_t step);
  // Copying: the same, from `grad` after `ready` (Engine::AddGrad): read in
  // stream order when `on_device`, else staged from host memory.
  absl::Status Add(int id, const void* grad, size_t numel, DType dtype,
                   const std::shared_ptr<Event>& ready, bool on_device, int64_t step);
  // OK when every micro-batch of the step is complete; else what is missing.
  absl::Status ReadyForStep() const;
  // Completed micro-batches of the current step.
  int micro_batches() const { return micro_batches_; }
  // How often a unit's slots were readied on ctx.stream (a buffer taken,
  // padding zeroed, the last reduction waited for): a producer stream
  // ordered after ctx.stream since the last change needs no new order.
  uint64_t readied() const { return readied_; }
  // Drops the step's gradients, a partial micro-batch included.
  void Clear();

 private:
  struct UnitState {
    int received = 0;  // parameters handed over in this micro-batch
    bool readied = false;  // its slots readied on ctx.stream in this micro-batch
    Buffer staging;    // the unit's gradients in flight (when not in whole gradients)
    // Recorded on the communication stream after the unit's last reduction:
    // gradients staged in place in the model states wait for it.
    std::shared_ptr<Event> reduced;
    // Error feedback: what this rank's quantized gradients of the unit lost
    // (padded fp32, laid out as the reductions send them).
    Buffer residual;
  };
  absl::Status CheckHandOver(int id, int64_t step) const;
  // Slot and Written without the checks (Add checks once).
  absl::StatusOr<char*> SlotOf(int id);
  absl::Status MarkWritten(int id);
  absl::StatusOr<char*> StagingFor(int unit);
  absl::Status ZeroPadding(int unit, char* staging);  // on the compute stream
  absl::Status ReduceReadyUnits();
  absl::Status ReduceUnit(int unit);
  absl::Status ReduceWidened(int unit, const char* staging, bool first);
  // The reduce-scatter of `count` fp32 per rank from `send`, quantized when
  // configured; `at` is the send's place in the unit's residual.
  absl::Status ReduceScatter(int unit, const float* send, float* recv, size_t count, size_t at);
  absl::Status AcrossReplicas(float* data, size_t count);
  // into = model dtype(from), or accumulated into it when !first.
  absl::Status Store(char* into, const float* from, size_t count, bool first);
  void ReleaseStaging(int unit);
  void ResetMicroBatch();

  const RankContext& ctx_;
  ModelStates& states_;
  const OnReduced on_reduced_;
  std::vector<UnitState> units_;
  // Per parameter, in this micro-batch: kSlotted once GradBuffer gave its
  // slot, kWritten once handed over.
  static constexpr uint8_t kSlotted = 2, kWritten = 1;
  std::vector<uint8_t> received_;
  int next_unit_to_reduce_;
  int micro_batches_ = 0;
  uint64_t readied_ = 0;
  uint64_t quantized_calls_ = 0;  // seeds stochastic rounding
};

}  // namespace zero
