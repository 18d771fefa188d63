// Gradient clipping's global norm. Each rank sums the squares of the
// gradient pieces it owns (piece r of every unit, at every stage) in fp64;
// the partial sums are gathered and added in rank order on every rank, so
// all ranks and all stages get the same norm to the last bit.
#include <cmath>

#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/precision.h"

namespace zero {

absl::StatusOr<double> Engine::GlobalGradNorm(float grad_scale) {
  const int n = layout_.world_size();
  if (!has_bytes()) return 0.0;
  if (devices_->kind() == DeviceKind::kCuda) {
    return absl::UnimplementedError(
        "gradient clipping and loss scaling on cards are not implemented yet");
  }
  RETURN_IF_ERROR(stream_->Synchronize());
  double mine = 0;
  for (int u = 0; u < static_cast<int>(layout_.units().size()); ++u) {
    const Unit& unit = layout_.units()[u];
    // Stage 0 holds the whole gradient; its piece r is what others own.
    const char* g = config_.stage == 0 ? At(grads_, owned_offset(u)) : OwnedGrad(u);
    mine += SumOfSquares(g, dtype_, unit.shard);
  }
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(pool_, n * sizeof(double), Tag::kCommunication,
                                                stream_));
  double* slot = all.data<double>() + rank_;
  *slot = mine;
  // Two fp32 lanes per double: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(comm_->AllGather(slot, all.data(), 2, DType::kF32, stream_));
  RETURN_IF_ERROR(stream_->Synchronize());
  double total = 0;
  for (int r = 0; r < n; ++r) total += all.data<double>()[r];
  return std::sqrt(total) * grad_scale;
}

}  // namespace zero
