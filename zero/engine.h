// The ZeRO engine of one rank: wraps any Optimizer and partitions its state
// (stage 1), the gradients (stage 2) and, later, the parameters (stage 3)
// across the ranks of a Communicator. A training loop uses the same calls at
// every stage:
//
//   auto engine = Engine::Create(config, params, &adam, comm, &devices, rank);
//   (or ..., rank, {.device = &limited, .host = &pinned}) to choose the memory)
//   for each step:
//     for each micro-batch:
//       forward, per module m: Fetch(m); use engine->param(i); Release(m)
//       backward, per module in reverse: Fetch(m); AddGrad(i, grad); Release(m)
//     engine->Step();
//
// Fetch and Release cost nothing below stage 3, where parameters are whole.
//
// Arithmetic is the same at every stage: each micro-batch's gradients are
// summed over ranks in rank order, micro-batches are accumulated in order,
// and the optimizer sees (sum) * 1/(ranks * micro-batches). So sharded
// training equals unsharded training bit for bit in fp32.
//
// An error that leaves this rank unable to follow its peers (a missing or
// malformed gradient, a collective that failed) also aborts the
// communicator, so every rank gets an error instead of waiting forever.
// One thread drives an engine; its buffers come from EngineMemory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string_view>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "base/fingerprint.h"
#include "memory/device_system.h"
#include "memory/statistics_adaptor.h"
#include "offload/host_pool.h"
#include "offload/state_file.h"
#include "optimizers/loss_scaler.h"
#include "optimizers/optimizer.h"
#include "zero/buffer.h"
#include "zero/comm/communicator.h"
#include "zero/config.h"
#include "zero/layout.h"

namespace zero {

struct RankContext;
class ModelStates;
class GradientReducer;
class ParameterGatherer;
class SerialWorker;
class Buffer;

// Where an engine's buffers come from; each must outlive the engine. Null
// members take the defaults: the device's pool, and (offload only) a pinned
// host pool of config.host_capacity bytes (default: the machine's memory;
// unbounded on meta devices) that the engine owns. Pass `host` to share one
// pinned pool with a Pager; pass an adaptor as `device` to cap or log.
struct EngineMemory {
  MemoryResource* device = nullptr;  // on the engine's device
  MemoryResource* host = nullptr;    // pinned host memory, for offload
};

struct EngineStats {
  int64_t steps = 0;          // optimizer updates applied
  int64_t skipped_steps = 0;  // fp16 steps skipped for overflow
  double loss_scale = 1;
  double last_grad_norm = 0;  // when clipping or fp16 is on
  int micro_batches = 0;  // completed in the current step
  PoolStats pool;         // this rank's device pool (all users), all tags
  // Bytes the engine holds in host memory (offload), as requested.
  size_t host_bytes = 0, peak_host_bytes = 0;
  int64_t early_unit_updates = 0;  // offload_overlap: units stepped during backward
  // offload_device nvme: the state the rank's file holds, and its traffic.
  size_t nvme_bytes = 0;
  uint64_t nvme_bytes_read = 0, nvme_bytes_written = 0;
  // Time this rank's calls waited for a reader of the owned state to finish
  // (GuardOwnedState: an async checkpoint's snapshot), in all.
  double owned_state_wait_seconds = 0;
  CommStats comm;
};

class Engine {
 public:
  // Collective: every rank calls it with the same parameters and config;
  // differing layouts are an error on every rank. Does not own `optimizer`,
  // `comm`, `devices` or `memory`, which must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                        std::vector<ParamSpec> params,
                                                        Optimizer* optimizer,
                                                        Communicator* comm,
                                                        DeviceSystem* devices, int device,
                                                        EngineMemory memory = {});
  ~Engine();

  const Layout& layout() const;
  const EngineConfig& config() const;

  // The full fp32 values of parameter `id`, identical on every rank after
  // each Step. At stage 3 only while its module is fetched (else
  // FailedPrecondition), and writes to it are not kept: use SetParam.
  // Ordered on stream(): read it in work enqueued there after this call, or
  // on the host after stream()->Synchronize() (with a communicator that
  // returns once enqueued, collectives may still be writing it before).
  absl::StatusOr<std::span<float>> param(int id);
  // The same in the model dtype (config().param_dtype): what a bf16 or fp16
  // model computes with. Same lifetime rules as param().
  struct ParamView {
    void* data;
    size_t numel;
    DType dtype;
  };
  absl::StatusOr<ParamView> param_view(int id);
  // Sets parameter `id` (every rank with the same values), e.g. at start:
  // the fp32 master weights and the model-dtype copy.
  absl::Status SetParam(int id, std::span<const float> values);

  // Multiply the loss by this before backward (fp16; 1 otherwise).
  double loss_scale() const;

  // Collective at stage 3: gathers the parameters of `module` on the
  // engine's communication stream (and, after the first step, prefetches
  // the next modules of the recorded order); `consumer` (default stream())
  // waits for them, so kernels enqueued there after Fetch see them. Release
  // frees them after the work enqueued on `consumer` so far (pass the same
  // stream). Calls nest: a module stays fetched until every Fetch has its
  // Release. Below stage 3 Fetch only orders `consumer` after the
  // all-gather of the last Step.
  absl::Status Fetch(int module, Stream* consumer = nullptr);
  absl::Status Release(int module, Stream* consumer = nullptr);
  // Elements gathered now, beyond this rank's own pieces (stage 3).
  size_t live_gathered_elements() const;

  // Hands over this micro-batch's gradient of parameter `id`, each parameter
  // once per micro-batch. A unit is reduced (on the communication stream,
  // overlapping what backward enqueues next) as soon as it and all later
  // units are complete, so reverse registration order overlaps best.
  //
  // In place, no copy: backward writes numel elements of the model dtype
  // at GradBuffer(id) (this rank's device memory, valid until GradWritten),
  // then GradWritten says the writes are done once `written` completes (an
  // event of the producing stream; null: work enqueued on stream() so far).
  // The slot is ready (its last reduction done, padding zeroed) in order on
  // stream(): a `producer` stream other than stream() is made to wait for
  // that before its later work; without one, write on stream().
  absl::StatusOr<void*> GradBuffer(int id, Stream* producer = nullptr);
  absl::Status GradWritten(int id, std::shared_ptr<Event> written = nullptr);
  // Copying, for callers that cannot write in place: enqueued on stream()
  // after `ready` (null: stream() order). The host never waits: `grad` in
  // this system's device memory must stay unchanged until the copy ran
  // (work enqueued on stream() later sees it done); other host memory is
  // staged at once and may be reused on return.
  absl::Status AddGrad(int id, const void* grad, size_t numel, DType dtype = DType::kF32,
                       std::shared_ptr<Event> ready = nullptr);
  absl::Status AddGrad(int id, std::span<const float> grad) {
    return AddGrad(id, grad.data(), grad.size(), DType::kF32);
  }

  // Collective: after gradient_accumulation_steps complete micro-batches,
  // updates the parameters and makes them whole again on every rank. The
  // update is ordered on stream() and the host does not wait for it (fp16's
  // skip decision aside): read the parameters after stream()->Synchronize().
  // A collective that failed on a stream before the update calls it off on
  // host devices; it is Step's error when already known, else the next
  // call's (AsyncError after a synchronize).
  absl::Status Step();
  // Drops the gradients of the current step (and of a partial micro-batch).
  absl::Status ZeroGrad();
  // FailedPrecondition while offload_overlap has stepped (or is stepping,
  // on its worker) units of this step during backward, until Step: the
  // optimizer's settings (lr) must not change then.
  absl::Status OptimizerMayChange() const;
  // FailedPrecondition in the same window, naming `what` (a checkpoint):
  // owned_state() is being stepped then, and would be read torn.
  absl::Status OwnedStateSettled(std::string_view what) const;

  // With clipping and no fp16 the last norm is still in device memory:
  // stats() then waits for stream() to read it (Step never does).
  EngineStats stats() const;

  // For checkpoints (zero/checkpoint/). This rank's owned piece of unit `u`:
  // flat elements [units[u].offset + rank * shard, + shard) as fp32 master
  // weights and one buffer per optimizer state. In device memory (pinned
  // host memory with offload; null on meta devices and with the state on
  // NVMe, where StreamOwnedState reaches it; all null for a unit that does
  // not exist): copy on stream().
  struct OwnedState {
    float* master;
    std::vector<float*> state;
  };
  OwnedState owned_state(int unit);
  // A reader of owned_state() that runs while training goes on (an async
  // checkpoint's snapshot, copying on its own stream): until `read` is
  // ready, every call that may change owned state waits for it first (Step
  // before its update, offload_overlap's early updates, SetParam, Restore,
  // BeginRestore, StreamOwnedState, owned_state()), and so does the
  // destructor. Forward and backward do not wait, except for the early
  // updates offload_overlap runs inside AddGrad. Nor does param(): at stage
  // 0-2 without mixed precision or offload the parameters are the masters,
  // so do not write them meanwhile. On the training thread; an earlier
  // guard is waited for first.
  void GuardOwnedState(std::shared_future<void> read);
  // The same piece wherever it lives, chunk by chunk, on the calling
  // thread: `fn(offset, count, planes)` gets elements [offset, offset +
  // count) of the piece, planes[0] the master weights and planes[1 + i]
  // optimizer state i, in host memory valid during the call. kRead hands
  // over what is there (fn leaves it so: later reads may take it from
  // staging); kWrite takes what fn leaves in every plane (every element
  // once); kUpdate both (to write some planes, keep the others).
  // On meta devices fn is never called. The second form: elements [begin,
  // begin + count) of the piece only.
  using StateAccess = StateFile::Pass;
  absl::Status StreamOwnedState(int unit, StateAccess access, StateFile::ChunkFn fn);
  absl::Status StreamOwnedState(int unit, size_t begin, size_t count, StateAccess access,
                                StateFile::ChunkFn fn);
  // offload_device nvme: this rank's state file (empty otherwise).
  std::string nvme_file() const;
  // The compute-facing stream (the caller's work, the optimizer) and the
  // one the collectives run on (the same with overlap_comm off).
  Stream* stream() const;
  Stream* comm_stream() const;
  struct ResumePoint {
    int64_t steps = 0;
    std::optional<LossScaler::State> loss_scaler;  // fp16 only
  };
  ResumePoint resume_point() const;
  // Collective, after every rank has overwritten owned_state() of every
  // unit: rebuilds all that derives from it (whole or gathered parameters,
  // stage 0's whole state, model-dtype copies), sets the step count and the
  // loss scale, and drops gradients in flight.
  // A rank whose check refuses fails every rank alike (agreed first).
  absl::Status Restore(const ResumePoint& point);
  // Restore in steps, for a caller that overwrites owned_state() unit by
  // unit and wants each unit's gathers to run while it writes the next
  // (checkpoint::Load): BeginRestore (checks `point` before changing
  // anything, sets it, drops gradients, waits for communication in flight),
  // then RestoreUnit(u) for u = 0, 1, ... in that order on every rank, each
  // once this rank has overwritten owned_state(u) and its writes on stream()
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
  Engine(RankContext ctx, Optimizer* optimizer, EngineMemory memory);
  // Places the model states, then builds the gradient and parameter sides.
  absl::Status Init();
  absl::Status Fail(absl::Status status);  // aborts the group, returns status
  absl::Status FailIfError(absl::Status status) { return status.ok() ? status : Fail(status); }
  absl::Status NotRestoring(std::string_view call);  // fails the group while restoring
  absl::Status NotUpdatedEarly() const;
  void AwaitOwnedStateReader();  // GuardOwnedState's, if any
  absl::Status WriteParam(int id, std::span<const float> values, const char* narrow);

  // Update (engine_step.cc).
  // The optimizer's gradient scale: a value, or (clipping, fp16) value x the
  // float at `at`, in device memory, written by an earlier op on stream().
  struct GradScale {
    float value;
    const float* at = nullptr;
  };
  absl::Status UpdateUnit(int unit, GradScale grad_scale);
  // One optimizer call over `master` (flat elements from `first_element`
  // of the layout; state from `state_offset`, the unit's owned gradients);
  // writes the model-dtype copy to `copy` when mixed. Enqueued on stream()
  // (on its device, whatever it is), or run on the calling thread over host
  // memory (offload's CPU step).
  absl::Status RunOptimizer(int unit, std::span<float> master, size_t first_element,
                            size_t state_offset, void* copy, int64_t step, GradScale grad_scale,
                            bool on_stream);
  // The same over given state spans and gradients (a chunk of a piece).
  absl::Status RunOptimizerOn(std::span<float> master, size_t first_element,
                              std::span<const std::span<float>> state, const void* grads,
                              void* copy, int64_t step, GradScale grad_scale, bool on_stream);
  // 1 / (ranks x micro-batches x loss scale): the mean the optimizer sees.
  float MeanGradScale() const;
  // Enqueues on stream() the global norm of the mean gradient and the
  // clipped scale (clip.cc) into step_scalars_; the host does not wait.
  // Meta devices: the plain mean scale, norm 0.
  absl::StatusOr<GradScale> ClippedGradScale(float mean_scale);
  // Waits for step_scalars_ and returns the norm (0 when none): not finite
  // when any rank's gradients overflowed.
  absl::StatusOr<double> ReadGradNorm() const;
  absl::Status SkipStep();

  // Orders stream() after everything on the communication stream so far.
  absl::Status AwaitComm();

  // Offload (engine_offload.cc).
  // The pinned host resource and the CPU step's worker.
  absl::Status CreateHostMemory();
  // The owned piece's CPU step with host buffers (any thread).
  absl::Status StepOnHost(int unit, int64_t step, float grad_scale);
  // Host -> device: the updated piece in the model dtype, made whole.
  absl::Status PublishUnit(int unit);
  absl::Status UpdateOffloaded(GradScale grad_scale);
  bool UpdatesEarly() const;  // offload_overlap applies to this micro-batch
  absl::Status OnUnitReduced(int unit);  // posts the unit's early CPU step if it applies
  // offload_device nvme: the rank's state file, the step streamed through it,
  // writes of master elements [offset, + count) of a unit's piece, and the
  // master's model-dtype copy rebuilt from it (into the host piece to publish).
  absl::Status CreateStateFile();
  absl::Status StepOnNvme(int unit, int64_t step, float grad_scale);
  absl::Status WriteMaster(int unit, size_t offset, const float* values, size_t count);
  absl::Status NarrowMaster(int unit, char* to);
  // Where the CPU step leaves the unit's updated model-dtype piece.
  char* UpdatedPiece(int unit) const;

  // Restore (engine_restore.cc): unit's derived state rebuilt.
  absl::Status RebuildUnit(int unit);

  // Settings, layout, communicator, device memory and stream; the parts
  // below point to it, so it is built first and never moves.
  const std::unique_ptr<const RankContext> ctx_;
  Optimizer* const optimizer_;
  DevicePool* const device_pool_;  // stats only: buffers come from ctx_->pool

  // Offload: where master weights, state and owned gradients live (the
  // caller's, or own_host_pool_), counted by host_. Declared before the
  // model states so that they outlive them.
  MemoryResource* const host_upstream_;
  std::unique_ptr<PinnedHostPool> own_host_pool_;
  std::unique_ptr<StatisticsAdaptor> host_;

  std::unique_ptr<StateFile> state_file_;        // offload_device nvme; else null
  std::unique_ptr<ModelStates> states_;          // zero/internal/model_states.h
  std::unique_ptr<GradientReducer> reducer_;     // zero/internal/gradient_reducer.h
  std::unique_ptr<ParameterGatherer> gatherer_;  // zero/internal/parameter_gatherer.h
  std::optional<LossScaler> scaler_;             // fp16
  int64_t steps_ = 0;
  int restore_next_ = -1;  // the unit RestoreUnit takes next; -1: not restoring
  int64_t skipped_steps_ = 0;
  double last_grad_norm_ = 0;
  // The last step's StepScalars (compute/elementwise_op.h) in device
  // memory; with clipping but no fp16 the host reads the norm only when
  // stats() asks (norm_on_device_).
  std::unique_ptr<Buffer> step_scalars_;
  bool norm_on_device_ = false;

  // Offload: CPU steps overlapping backward. Last, so it stops first.
  std::unique_ptr<SerialWorker> worker_;
  bool updated_early_ = false;  // this step's pieces were stepped as reduced
  int64_t early_unit_updates_ = 0;

  std::shared_future<void> owned_state_reader_;  // GuardOwnedState; invalid: none
  double owned_state_wait_seconds_ = 0;
};

}  // namespace zero
