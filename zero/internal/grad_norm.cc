#include "zero/internal/grad_norm.h"

#include "base/status_macros.h"
#include "compute/elementwise_op.h"

namespace zero {
namespace {

// The buffer holds the n partials, then the StepScalars.
StepScalars* ScalarsIn(const Buffer& b, int ranks) {
  return reinterpret_cast<StepScalars*>(b.data<double>() + ranks);
}

}  // namespace

absl::StatusOr<GradScale> GradNorm::Compute(const ModelStates& states, float mean_scale) {
  const RankContext& ctx = ctx_;
  const int n = ctx.layout.world_size();
  if (!ctx.has_bytes) return GradScale{mean_scale};
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(ctx.pool, n * sizeof(double) + sizeof(StepScalars),
                                                Tag::kCommunication, ctx.stream));
  double* slot = all.data<double>() + ctx.rank;
  RETURN_IF_ERROR(ctx.stream->Fill(slot, 0, sizeof(double)));
  for (int u = 0; u < ctx.unit_count(); ++u) {
    RETURN_IF_ERROR(ctx.elementwise->SumOfSquares(slot, states.OwnedGradPiece(u),
                                                  ctx.unit(u).shard, ctx.dtype, ctx.stream));
  }
  // Two fp32 lanes per double: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(ctx.comm->AllGather(slot, all.data(), 2, DType::kF32, ctx.stream));
  StepScalars* scalars = ScalarsIn(all, n);
  RETURN_IF_ERROR(ctx.elementwise->ComputeStepScalars(scalars, all.data<double>(), n, mean_scale,
                                                      ctx.config.max_grad_norm, ctx.stream));
  // The previous step's scalars are freed on the stream, after its readers.
  scalars_ = std::make_unique<Buffer>(std::move(all));
  return GradScale{.value = 1.0f, .at = &scalars->grad_scale};
}

absl::StatusOr<double> GradNorm::Read() const {
  if (scalars_ == nullptr) return 0.0;
  double norm = 0;
  const StepScalars* scalars = ScalarsIn(*scalars_, ctx_.layout.world_size());
  RETURN_IF_ERROR(ctx_.stream->Copy(&norm, &scalars->norm, sizeof(norm)));
  RETURN_IF_ERROR(ctx_.stream->Synchronize());
  return norm;
}

}  // namespace zero
