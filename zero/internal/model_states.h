// One rank's model-state buffers, allocated once where PlaceStates says
// (zero/placement.h): in device memory, in pinned host memory (offload; the
// pool is the caller's or one of its own) and in the NVMe state file
// (offload_device nvme), and where each unit's pieces are in them. The
// stage decides the addressing; callers ask for a unit's piece and never
// branch on the stage or on where it lives. Owned by the engine; one thread
// at a time (the engine's, or offload's worker during an early step).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/statistics_adaptor.h"
#include "offload/host_pool.h"
#include "offload/state_file.h"
#include "zero/buffer.h"
#include "zero/internal/rank_context.h"
#include "zero/placement.h"

namespace zero {

class ModelStates {
 public:
  // Zeroed buffers (padding is summed, updated and gathered like the rest):
  // device ones from ctx.pool, host ones from `host` (null: a pinned pool
  // of config.host_capacity that these states own), the NVMe ones in a
  // state file of 1 + `state_buffers` planes. Waits for the fills.
  static absl::StatusOr<std::unique_ptr<ModelStates>> Allocate(const RankContext& ctx,
                                                               const Placement& placement,
                                                               MemoryResource* host,
                                                               int state_buffers);
  ~ModelStates();

  // Model dtype, the whole unit (stages 0-2; null at stage 3).
  char* WholeParams(int unit) const;
  // Model dtype, this rank's piece of the parameters.
  char* ModelPiece(int unit) const;
  // fp32 master weights of this rank's piece (the parameters themselves
  // when not kept apart; not in memory when in the state file).
  float* MasterPiece(int unit) const;
  // Offload with mixed precision: the CPU step's model-dtype piece.
  char* HostModelPiece(int unit) const;
  // Offload: where the CPU step leaves the unit's updated model-dtype piece
  // (the parameters themselves when they live on the host; else the host
  // piece that is published, which is the master at fp32 in memory).
  char* CpuStepPiece(int unit) const;
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
  // `count` elements of every optimizer state buffer from `offset`.
  std::vector<std::span<float>> StateAt(size_t offset, size_t count) const;
  // The flat buffers themselves, at an element: whole or this rank's
  // pieces, as the stage keeps them (zero/placement.h).
  char* params_at(size_t elements) const { return ctx_.At(params_, elements); }
  float* master_data() const { return master_.data<float>(); }

  // This rank's owned piece of `unit` where it lives, for checkpoints:
  // fp32 master weights and one pointer per optimizer state buffer, in
  // device memory (pinned host memory with offload); all null on meta
  // devices, with the state in the file (Stream reaches it) and for a unit
  // that does not exist.
  struct Owned {
    float* master;
    std::vector<float*> state;
  };
  Owned OwnedPieces(int unit) const;
  // Elements [begin, begin + count) of the owned piece wherever it lives,
  // chunk by chunk on the calling thread (StateFile::Run's contract: planes
  // [0] master, [1 + i] state i, in host memory during the call). Arguments
  // are checked by the caller. Nothing on meta devices; FailedPrecondition
  // for state in card memory (copy it from OwnedPieces on ctx.stream).
  absl::Status StreamOwned(int unit, size_t begin, size_t count, StateFile::Pass access,
                           StateFile::ChunkFn fn);
  // Master elements [offset, offset + count) of the unit's piece from
  // `values` (host memory): an update of the file's planes, or a copy
  // enqueued on ctx.stream (`values` must outlive it).
  absl::Status WriteMaster(int unit, size_t offset, const float* values, size_t count);
  // NVMe: the master of the unit's piece, narrowed to the model dtype, into
  // `to` (host memory), on the calling thread.
  absl::Status NarrowMaster(int unit, char* to);

  // Offload: the pinned host memory, counted; null without. NVMe: the
  // rank's state file; null without.
  const StatisticsAdaptor* host_memory() const { return host_.get(); }
  StateFile* state_file() const { return state_file_.get(); }

 private:
  explicit ModelStates(const RankContext& ctx) : ctx_(ctx) {}
  absl::Status CreateHostMemory(MemoryResource* upstream);
  absl::Status CreateStateFile(int state_buffers);
  absl::Status AllocateZeroed(Buffer& b, MemoryResource* from, const Placed& placed);

  const RankContext& ctx_;
  // Declared before the buffers, which they outlive.
  std::unique_ptr<PinnedHostPool> own_host_pool_;
  std::unique_ptr<StatisticsAdaptor> host_;
  std::unique_ptr<StateFile> state_file_;
  Buffer params_;       // model dtype: whole (stages 0-2) or pieces (3)
  Buffer master_;       // fp32 master apart: whole (stage 0) or pieces
  Buffer host_params_;  // offload, mixed: the CPU step's model-dtype pieces
  Buffer grads_;        // stages 0-1: flat gradients, whole
  Buffer owned_grads_;  // stage 1 (accumulating), 2-3: this rank's pieces
  std::vector<Buffer> state_;  // optimizer state: whole (stage 0) or pieces
};

}  // namespace zero
