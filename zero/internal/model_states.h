// One rank's model-state buffers, allocated once where PlaceStates says
// (zero/placement.h), and where each unit's pieces are in them. The stage
// decides the addressing; callers ask for a unit's piece and never branch
// on the stage themselves. Owned by the engine; one thread.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "zero/buffer.h"
#include "zero/internal/rank_context.h"
#include "zero/placement.h"

namespace zero {

class ModelStates {
 public:
  // Zeroed buffers (padding is summed, updated and gathered like the rest):
  // device ones from ctx.pool, host ones from `host` (null when the
  // placement puts nothing on the host). Waits for the fills.
  static absl::StatusOr<std::unique_ptr<ModelStates>> Allocate(const RankContext& ctx,
                                                               const Placement& placement,
                                                               MemoryResource* host);

  // Model dtype, the whole unit (stages 0-2; null at stage 3).
  char* WholeParams(int unit) const;
  // Model dtype, this rank's piece of the parameters.
  char* ModelPiece(int unit) const;
  // fp32 master weights of this rank's piece (the parameters themselves
  // when not kept apart).
  float* MasterPiece(int unit) const;
  // Offload with mixed precision: the CPU step's model-dtype piece.
  char* HostModelPiece(int unit) const;
  // Stages 0-1: the whole unit's gradients.
  char* WholeGrads(int unit) const;
  // The reduced gradients the optimizer reads for `unit` (stage 0: all).
  char* OwnedGrads(int unit) const;
  // This rank's piece of them (stage 0, which reduces whole: the slice
  // other stages' rank r owns), so every stage sums the same elements.
  char* OwnedGradPiece(int unit) const;
  // Offset of the unit's optimizer state (and master piece) that the
  // optimizer updates: the whole unit at stage 0, else this rank's piece.
  size_t StateOffset(int unit) const;
  // Offset of this rank's piece in the state and master buffers.
  size_t OwnedStateOffset(int unit) const;
  std::vector<Buffer>& optimizer_state() { return state_; }
  // The flat buffers themselves, at an element: whole or this rank's
  // pieces, as the stage keeps them (zero/placement.h).
  char* params_at(size_t elements) const { return ctx_.At(params_, elements); }
  float* master_data() const { return master_.data<float>(); }

 private:
  explicit ModelStates(const RankContext& ctx) : ctx_(ctx) {}
  absl::Status AllocateZeroed(Buffer& b, MemoryResource* from, const Placed& placed);

  const RankContext& ctx_;
  Buffer params_;       // model dtype: whole (stages 0-2) or pieces (3)
  Buffer master_;       // fp32 master apart: whole (stage 0) or pieces
  Buffer host_params_;  // offload, mixed: the CPU step's model-dtype pieces
  Buffer grads_;        // stages 0-1: flat gradients, whole
  Buffer owned_grads_;  // stage 1 (accumulating), 2-3: this rank's pieces
  std::vector<Buffer> state_;  // optimizer state: whole (stage 0) or pieces
};

}  // namespace zero
