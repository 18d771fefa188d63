// What zero/checkpoint/ needs of a rank's engine, and nothing else: the
// pieces of model state this rank owns (fp32 master weights and optimizer
// state, flat elements [units[u].offset + rank * shard, + shard) of each
// unit), read and written where they live; a guard for readers that copy
// them while training goes on; and a restore that rebuilds everything that
// derives from them. Engine::owned_state() gives it; it lives as long as
// the engine, and the engine's thread drives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "offload/state_file.h"
#include "optimizers/loss_scaler.h"
#include "zero/internal/model_states.h"

namespace zero {

class Engine;

// Where a restored engine resumes: the step count and, for fp16, the loss
// scaler's state.
struct ResumePoint {
  int64_t steps = 0;
  std::optional<LossScaler::State> loss_scaler;  // fp16 only
};

class OwnedStateAccess {
 public:
  // This rank's owned piece of unit `u`: fp32 master weights and one buffer
  // per optimizer state, in device memory (pinned host memory with offload;
  // null on meta devices and with the state on NVMe, where Stream reaches
  // it; all null for a unit that does not exist): copy on the engine's
  // stream(). Waits for a guarded reader first (the caller may write).
  using Pieces = ModelStates::Owned;
  Pieces pieces(int unit);

  // The same piece wherever it lives, chunk by chunk, on the calling
  // thread: `fn(offset, count, planes)` gets elements [offset, offset +
  // count) of the piece, planes[0] the master weights and planes[1 + i]
  // optimizer state i, in host memory valid during the call. kRead hands
  // over what is there (fn leaves it so: later reads may take it from
  // staging); kWrite takes what fn leaves in every plane (every element
  // once); kUpdate both (to write some planes, keep the others). On meta
  // devices fn is never called. The second form: elements [begin, begin +
  // count) of the piece only.
  using Access = StateFile::Pass;
  absl::Status Stream(int unit, Access access, StateFile::ChunkFn fn);
  absl::Status Stream(int unit, size_t begin, size_t count, Access access,
                      StateFile::ChunkFn fn);
  // offload_device nvme: this rank's state file (empty otherwise).
  std::string nvme_file() const;

  // A reader of pieces() that runs while training goes on (an async
  // checkpoint's snapshot, copying on its own stream): until `read` is
  // ready, every call that may change owned state waits for it first (Step
  // before its update, offload_overlap's early updates, SetParam, restores,
  // Stream, pieces()), and so does the engine's destructor. Forward and
  // backward do not wait, except for the early updates offload_overlap runs
  // inside AddGrad. Nor does param(): at stage 0-2 without mixed precision
  // or offload the parameters are the masters, so do not write them
  // meanwhile. An earlier guard is waited for first.
  void Guard(std::shared_future<void> read);
  // Engine::OwnedStateSettled: FailedPrecondition, naming `what` (a
  // checkpoint), while offload_overlap steps this step's pieces.
  absl::Status Settled(std::string_view what) const;

  ResumePoint resume_point() const;
  // Collective, after every rank has overwritten pieces() of every unit:
  // rebuilds all that derives from them (whole or gathered parameters,
  // stage 0's whole state, model-dtype copies), sets the step count and the
  // loss scale, and drops gradients in flight. A rank whose check refuses
  // fails every rank alike (agreed first).
  absl::Status Restore(const ResumePoint& point);
  // Restore in steps, for a caller that overwrites pieces() unit by unit
  // and wants each unit's gathers to run while it writes the next
  // (checkpoint::Load): BeginRestore (checks `point` before changing
  // anything, sets it, drops gradients, waits for communication in flight),
  // then RestoreUnit(u) for u = 0, 1, ... in that order on every rank, each
  // once this rank has overwritten pieces(u) and its writes on the stream
  // are enqueued, then EndRestore. Calls out of that order, and Step,
  // Fetch, Release, gradients, SetParam or ZeroGrad in between, fail the
  // group (the peers wait in the collectives), as does a failed gather.
  absl::Status BeginRestore(const ResumePoint& point);
  // What BeginRestore(point) would refuse, changing nothing: ranks that
  // must restore together agree on it first.
  absl::Status CheckResumePoint(const ResumePoint& point) const;
  absl::Status RestoreUnit(int unit);
  absl::Status EndRestore();

 private:
  friend class Engine;
  explicit OwnedStateAccess(Engine& engine) : engine_(engine) {}
  // Unit's derived state rebuilt from its owned pieces.
  absl::Status RebuildUnit(int unit);
  bool restoring() const { return restore_next_ >= 0; }

  Engine& engine_;
  int restore_next_ = -1;  // the unit RestoreUnit takes next; -1: not restoring
};

}  // namespace zero
