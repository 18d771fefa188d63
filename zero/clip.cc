// Gradient clipping's global norm and the step's gradient scale, kept in
// device memory. Each rank sums the squares of the gradient pieces it owns
// (piece r of every unit, at every stage) in fp64; the partial sums are
// gathered and added in rank order on every rank's stream (StepScalarsOf),
// so all ranks and all stages get the same norm to the last bit, and the
// optimizer reads the clipped scale where the stream wrote it.
#include "base/status_macros.h"
#include "compute/elementwise_op.h"
#include "zero/buffer.h"
#include "zero/engine.h"
#include "zero/internal/model_states.h"
#include "zero/internal/rank_context.h"

namespace zero {
namespace {

// The buffer holds the n partials, then the StepScalars.
StepScalars* ScalarsIn(const Buffer& b, int ranks) {
  return reinterpret_cast<StepScalars*>(b.data<double>() + ranks);
}

}  // namespace

absl::StatusOr<Engine::GradScale> Engine::ClippedGradScale(float mean_scale) {
  const RankContext& ctx = *ctx_;
  const int n = ctx.layout.world_size();
  if (!ctx.has_bytes) return GradScale{mean_scale};
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(ctx.pool, n * sizeof(double) + sizeof(StepScalars),
                                                Tag::kCommunication, ctx.stream));
  double* slot = all.data<double>() + ctx.rank;
  RETURN_IF_ERROR(ctx.stream->Fill(slot, 0, sizeof(double)));
  for (int u = 0; u < ctx.unit_count(); ++u) {
    RETURN_IF_ERROR(ctx.elementwise->SumOfSquares(slot, states_->OwnedGradPiece(u),
                                                  ctx.unit(u).shard, ctx.dtype, ctx.stream));
  }
  // Two fp32 lanes per double: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(ctx.comm->AllGather(slot, all.data(), 2, DType::kF32, ctx.stream));
  StepScalars* scalars = ScalarsIn(all, n);
  RETURN_IF_ERROR(ctx.elementwise->ComputeStepScalars(scalars, all.data<double>(), n, mean_scale,
                                                      ctx.config.max_grad_norm, ctx.stream));
  // The previous step's scalars are freed on the stream, after its readers.
  step_scalars_ = std::make_unique<Buffer>(std::move(all));
  return GradScale{.value = 1.0f, .at = &scalars->grad_scale};
}

absl::StatusOr<double> Engine::ReadGradNorm() const {
  if (step_scalars_ == nullptr) return 0.0;
  double norm = 0;
  const StepScalars* scalars = ScalarsIn(*step_scalars_, ctx_->layout.world_size());
  RETURN_IF_ERROR(ctx_->stream->Copy(&norm, &scalars->norm, sizeof(norm)));
  RETURN_IF_ERROR(ctx_->stream->Synchronize());
  return norm;
}

}  // namespace zero
