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

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "optimizers/loss_scaler.h"
#include "optimizers/optimizer.h"
#include "zero/comm/communicator.h"
#include "zero/config.h"
#include "zero/internal/owned_state_guard.h"
#include "zero/internal/step_ops.h"
#include "zero/layout.h"
#include "zero/owned_state.h"

namespace zero {

struct RankContext;
class ModelStates;
class GradientReducer;
class ParameterGatherer;
class HostStepper;
class GradNorm;
struct GradScale;

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
  // (OwnedStateAccess::Guard: an async checkpoint's snapshot), in all.
  double owned_state_wait_seconds = 0;
  CommStats comm;
  // The last step's work on this rank's device streams: operations enqueued,
  // host waits, driver calls (zero/internal/step_ops.h says which windows).
  StepStreamOps stream_ops;
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
  // Groups holding the same shards (hybrid sharding, config().shard_group_size); 1 otherwise.
  int replicas() const;

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
  // After Fetch(module), for a caller that reads the parameters on the host
  // (a CPU framework on host devices): blocks until they hold their values,
  // and for nothing else: prefetches and gradient reductions in flight go
  // on, which a wait for the streams would stop. A gather that failed on
  // the stream is the error.
  absl::Status AwaitFetchedOnHost(int module);
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
  // device memory must stay unchanged until the copy ran (work enqueued on
  // stream() later sees it done); host memory is staged at once and may be
  // reused on return. Which one it is, the caller says (`source`): the
  // engine asks no driver about the pointer.
  enum class GradSource {
    kAuto,    // this system's device memory (known by address), else host memory
    kDevice,  // the engine's device, any allocator's (a framework's card tensor)
  };
  absl::Status AddGrad(int id, const void* grad, size_t numel, DType dtype = DType::kF32,
                       std::shared_ptr<Event> ready = nullptr,
                       GradSource source = GradSource::kAuto);
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
  // The one flag for "the owned state may change now": FailedPrecondition,
  // naming `what`, while offload_overlap has stepped (or is stepping, on its
  // worker) units of this step during backward, until Step. Then the owned
  // state is part old, part new, and the optimizer's settings (lr) must not
  // change: ZeroGrad, SetParam, checkpoints and restores are refused too.
  absl::Status OwnedStateSettled(std::string_view what) const;

  // With clipping and no fp16 the last norm is still in device memory:
  // stats() then waits for stream() to read it (Step never does).
  EngineStats stats() const;

  // For checkpoints (zero/checkpoint/): the pieces this rank owns, read and
  // written where they live, and the restore (zero/owned_state.h).
  OwnedStateAccess& owned_state() { return owned_state_; }
  const OwnedStateAccess& owned_state() const { return owned_state_; }

  // The compute-facing stream (the caller's work, the optimizer) and the
  // one the collectives run on (the same with overlap_comm off).
  Stream* stream() const;
  Stream* comm_stream() const;

 private:
  friend class OwnedStateAccess;  // the checkpoint's face of the engine
  Engine(RankContext ctx, Optimizer* optimizer);
  // Places the model states, then builds the gradient and parameter sides
  // and, with offload, the host stepper.
  absl::Status Init(MemoryResource* host_memory);
  absl::Status Fail(absl::Status status);  // aborts the group, returns status
  absl::Status FailIfError(absl::Status status) { return status.ok() ? status : Fail(status); }
  absl::Status NotRestoring(std::string_view call);  // fails the group while restoring
  absl::Status WriteParam(int id, std::span<const float> values, const char* narrow);
  // The reducer's callback: offload_overlap's early CPU step of `unit`.
  absl::Status OnUnitReduced(int unit);

  // Update (engine_step.cc): the owned piece of `unit` (stage 0: all of it)
  // on stream(), then (stages 1-2) made whole on every rank again.
  absl::Status UpdateUnit(int unit, GradScale grad_scale);
  // 1 / (ranks x micro-batches x loss scale): the mean the optimizer sees
  // (micro-batches 1 without config().average_micro_batches).
  float MeanGradScale() const;
  absl::Status SkipStep();
  absl::Status StepOnce();  // Step but for its figures
  // A gradient's hand-over to the reducer (failing the group on error), and
  // the end of a micro-batch it completes marked in the step's figures.
  absl::Status HandOver(absl::FunctionRef<absl::Status()> hand_over);
  // Orders stream() after everything on the communication stream so far.
  absl::Status AwaitComm();

  // Settings, layout, communicator, device memory and stream; the parts
  // below point to it, so it is built first and never moves.
  const std::unique_ptr<const RankContext> ctx_;
  Optimizer* const optimizer_;
  DevicePool* const device_pool_;  // stats only: buffers come from ctx_->pool

  std::unique_ptr<ModelStates> states_;          // zero/internal/model_states.h
  std::unique_ptr<GradientReducer> reducer_;     // zero/internal/gradient_reducer.h
  std::unique_ptr<ParameterGatherer> gatherer_;  // zero/internal/parameter_gatherer.h
  std::unique_ptr<GradNorm> norm_;               // zero/internal/grad_norm.h
  std::optional<LossScaler> scaler_;             // fp16
  int64_t steps_ = 0;
  int64_t skipped_steps_ = 0;
  double last_grad_norm_ = 0;
  // With clipping but no fp16 the host reads the last norm only when
  // stats() asks.
  bool norm_on_device_ = false;
  OwnedStateGuard guard_;  // an async checkpoint's snapshot, while it copies
  // The producer GradBuffer last ordered after stream(), and the reducer's
  // readied() count then: later slots of readied units need no new order.
  Stream* ordered_producer_ = nullptr;
  uint64_t ordered_at_readied_ = 0;
  // Per-step stream figures; mutable: stats() leaves its own norm read out.
  mutable StepOpsMeter ops_;
  OwnedStateAccess owned_state_{*this};
  // Offload (zero/internal/host_stepper.h); null without. Last: it stops
  // its worker first.
  std::unique_ptr<HostStepper> host_;
};

}  // namespace zero
