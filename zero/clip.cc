// Gradient clipping's global norm. Each rank sums the squares of the
// gradient pieces it owns (piece r of every unit, at every stage) in fp64;
// the partial sums are gathered and added in rank order on every rank, so
// all ranks and all stages get the same norm to the last bit.
#include <cmath>

#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/internal/model_states.h"
#include "zero/internal/rank_context.h"
#include "zero/precision.h"

namespace zero {

absl::StatusOr<double> Engine::GlobalGradNorm(float grad_scale) {
  const RankContext& ctx = *ctx_;
  const int n = ctx.layout.world_size();
  if (!ctx.has_bytes) return 0.0;
  if (ctx.on_card()) {
    return absl::UnimplementedError(
        "gradient clipping and loss scaling on cards are not implemented yet");
  }
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  double mine = 0;
  for (int u = 0; u < ctx.unit_count(); ++u) {
    mine += SumOfSquares(states_->OwnedGradPiece(u), ctx.dtype, ctx.unit(u).shard);
  }
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(ctx.pool, n * sizeof(double),
                                                Tag::kCommunication, ctx.stream));
  double* slot = all.data<double>() + ctx.rank;
  *slot = mine;
  // Two fp32 lanes per double: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(ctx.comm->AllGather(slot, all.data(), 2, DType::kF32, ctx.stream));
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  double total = 0;
  for (int r = 0; r < n; ++r) total += all.data<double>()[r];
  return std::sqrt(total) * grad_scale;
}

}  // namespace zero
