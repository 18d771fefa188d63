// Gradient clipping's global norm. Each rank sums the squares of the
// gradient pieces it owns (piece r of every unit, at every stage) in fp64;
// the partial sums are gathered and added in rank order on every rank, so
// all ranks and all stages get the same norm to the last bit.
#include <cmath>
#include <vector>

#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/internal/model_states.h"
#include "zero/internal/rank_context.h"

namespace zero {

absl::StatusOr<double> Engine::GlobalGradNorm(float grad_scale) {
  const RankContext& ctx = *ctx_;
  const int n = ctx.layout.world_size();
  if (!ctx.has_bytes) return 0.0;
  // This rank's partial sum stays in device memory until all are gathered;
  // the host then waits once for the n partials.
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(ctx.pool, n * sizeof(double),
                                                Tag::kCommunication, ctx.stream));
  double* slot = all.data<double>() + ctx.rank;
  RETURN_IF_ERROR(ctx.stream->Fill(slot, 0, sizeof(double)));
  for (int u = 0; u < ctx.unit_count(); ++u) {
    RETURN_IF_ERROR(ctx.elementwise->SumOfSquares(slot, states_->OwnedGradPiece(u),
                                                  ctx.unit(u).shard, ctx.dtype, ctx.stream));
  }
  // Two fp32 lanes per double: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(ctx.comm->AllGather(slot, all.data(), 2, DType::kF32, ctx.stream));
  std::vector<double> partial(n);
  RETURN_IF_ERROR(ctx.stream->Copy(partial.data(), all.data(), n * sizeof(double)));
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  double total = 0;
  for (int r = 0; r < n; ++r) total += partial[r];
  return std::sqrt(total) * grad_scale;
}

}  // namespace zero
