// Gradient clipping's global norm and the step's gradient scale, kept in
// device memory. Each rank sums the squares of the gradient pieces it owns
// (piece r of every unit, at every stage) in fp64; the partial sums are
// gathered and added in rank order on every rank's stream (StepScalarsOf,
// compute/elementwise_rules.h), so all ranks and all stages get the same
// norm to the last bit, and the optimizer reads the clipped scale where the
// stream wrote it: the host waits only when it asks for the norm. One
// thread (the engine's).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "zero/buffer.h"
#include "zero/internal/model_states.h"
#include "zero/internal/piece_update.h"
#include "zero/internal/rank_context.h"

namespace zero {

class GradNorm {
 public:
  explicit GradNorm(const RankContext& ctx) : ctx_(ctx) {}

  // Collective: enqueues on ctx.stream the global norm of the mean
  // gradient (`mean_scale` x the reduced gradients in `states`) and the
  // clipped scale (config.max_grad_norm; 0: none), and returns that scale
  // where the stream writes it. Meta devices: the plain mean scale.
  absl::StatusOr<GradScale> Compute(const ModelStates& states, float mean_scale);
  // Waits for the last Compute's norm (0 when there was none): not finite
  // when any rank's gradients overflowed.
  absl::StatusOr<double> Read() const;

 private:
  const RankContext& ctx_;
  // The n partial sums, then the StepScalars; the last one is kept until
  // the next Compute (the optimizer reads it on the stream).
  std::unique_ptr<Buffer> scalars_;
};

}  // namespace zero
