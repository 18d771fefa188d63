// ZeRO-Offload: the owned pieces' fp32 master weights, optimizer state and
// reduced gradients live in pinned host memory and the optimizer steps on
// the CPU; only the model-dtype parameters go back to the device. With
// Offload::kParameters (stage 3) the parameter pieces stay on the host too
// and come up when a module is gathered. The CPU step is the same code the
// host devices run, so offloaded training equals device training bit for bit.
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/internal/gradient_reducer.h"
#include "zero/internal/model_states.h"
#include "zero/internal/parameter_gatherer.h"
#include "zero/internal/rank_context.h"
#include "zero/internal/serial_worker.h"
#include "zero/precision.h"

namespace zero {

namespace {

// What an engine-owned pinned pool may hold when the config does not say:
// the machine's memory (pinning more would fail anyway), or, on meta devices
// (no bytes), as much as an experiment asks for.
size_t DefaultHostCapacity(DeviceKind kind) {
  if (kind == DeviceKind::kMeta) return size_t{1} << 50;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * page : size_t{1} << 34;
}

}  // namespace

absl::Status Engine::CreateHostMemory() {
  MemoryResource* upstream = host_upstream_;
  if (upstream == nullptr) {
    const size_t configured = ctx_->config.host_capacity;
    const size_t capacity =
        configured > 0 ? configured : DefaultHostCapacity(ctx_->devices->kind());
    ASSIGN_OR_RETURN(own_host_pool_, PinnedHostPool::Create(ctx_->devices, capacity));
    upstream = own_host_pool_.get();
  }
  host_ = std::make_unique<StatisticsAdaptor>(upstream);
  worker_ = std::make_unique<SerialWorker>();
  return absl::OkStatus();
}

bool Engine::UpdatesEarly() const {
  const EngineConfig& c = ctx_->config;
  return ctx_->offload() && c.offload_overlap && c.max_grad_norm == 0 && !scaler_ &&
         reducer_->micro_batches() == c.gradient_accumulation_steps - 1;
}

// The optimizer's grad_scale and step as Step will have them (no clipping
// or loss scale when updating early).
absl::Status Engine::OnUnitReduced(int unit) {
  if (!UpdatesEarly()) return absl::OkStatus();
  AwaitOwnedStateReader();
  const float scale = MeanGradScale();
  const int64_t step = steps_ + 1;
  // The unit's reduced gradients are written on the communication stream:
  // the CPU step waits for them there, not for the whole stream.
  ASSIGN_OR_RETURN(std::shared_ptr<Event> reduced, ctx_->comm_stream->Record());
  worker_->Post([this, unit, step, scale, reduced] {
    RETURN_IF_ERROR(reduced->Synchronize());
    return StepOnHost(unit, step, scale);
  });
  updated_early_ = true;
  ++early_unit_updates_;
  return absl::OkStatus();
}

// Parameters kept on the host are updated in place; otherwise the model-
// dtype piece waits on the host to be published (fp32 on the host: the
// master itself, unless that is in the NVMe file).
char* Engine::UpdatedPiece(int unit) const {
  if (ctx_->config.offload == Offload::kParameters) return states_->ModelPiece(unit);
  if (ctx_->mixed || state_file_ != nullptr) return states_->HostModelPiece(unit);
  return reinterpret_cast<char*>(states_->MasterPiece(unit));
}

absl::Status Engine::StepOnHost(int unit, int64_t step, float grad_scale) {
  if (!ctx_->has_bytes) return absl::OkStatus();
  if (state_file_ != nullptr) return StepOnNvme(unit, step, grad_scale);
  const Unit& u = ctx_->unit(unit);
  float* master = states_->MasterPiece(unit);
  char* updated = UpdatedPiece(unit);
  RETURN_IF_ERROR(RunOptimizer(unit, {master, u.shard}, ctx_->owned_offset(unit),
                               u.shard_offset, ctx_->mixed ? updated : nullptr, step,
                               GradScale{grad_scale}, /*on_stream=*/false));
  // fp32 parameters kept on the host are the master's copy.
  if (!ctx_->mixed && updated != reinterpret_cast<char*>(master)) {
    std::memcpy(updated, master, u.shard * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status Engine::PublishUnit(int unit) {
  if (ctx_->config.offload == Offload::kParameters) return absl::OkStatus();
  const Unit& u = ctx_->unit(unit);
  if (ctx_->has_bytes) {
    RETURN_IF_ERROR(
        ctx_->stream->Copy(states_->ModelPiece(unit), UpdatedPiece(unit), u.shard * ctx_->esize));
  }
  if (ctx_->config.stage == 3) return absl::OkStatus();
  return gatherer_->Publish(unit);
}

// Steps whatever the overlap did not, then brings the parameters up.
absl::Status Engine::UpdateOffloaded(GradScale grad_scale) {
  if (updated_early_) {
    updated_early_ = false;
    RETURN_IF_ERROR(worker_->Wait());
  } else {
    // The CPU steps with a host value: the scale comes up with the wait
    // for the gradients (value is 1 with a device scale).
    float scale = grad_scale.value;
    if (grad_scale.at != nullptr) {
      RETURN_IF_ERROR(ctx_->stream->Copy(&scale, grad_scale.at, sizeof(scale)));
    }
    RETURN_IF_ERROR(ctx_->stream->Synchronize());
    for (int u = 0; u < ctx_->unit_count(); ++u) {
      RETURN_IF_ERROR(StepOnHost(u, steps_, scale));
    }
  }
  for (int u = 0; u < ctx_->unit_count(); ++u) RETURN_IF_ERROR(PublishUnit(u));
  return absl::OkStatus();
}


// ---- ZeRO-Infinity: master weights and optimizer state on NVMe ----------------

absl::Status Engine::CreateStateFile() {
  const EngineConfig& c = ctx_->config;
  if (host_ == nullptr) RETURN_IF_ERROR(CreateHostMemory());
  std::vector<size_t> pieces;
  for (int u = 0; u < ctx_->unit_count(); ++u) pieces.push_back(ctx_->unit(u).shard);
  absl::StatusOr<std::unique_ptr<StateFile>> file =
      StateFile::Create(1 + optimizer_->state_buffers(), std::move(pieces), host_.get(),
                        {.folder = c.nvme_path,
                         .chunk_elements = c.nvme_chunk_elements,
                         .has_bytes = ctx_->has_bytes});
  if (!file.ok()) {
    return Annotate(file.status(),
                    absl::StrFormat("rank %d: optimizer state on NVMe", ctx_->rank));
  }
  state_file_ = *std::move(file);
  return absl::OkStatus();
}

// The same optimizer call as StepOnHost, one chunk at a time while the next
// is read and the previous written (StateFile::Run).
absl::Status Engine::StepOnNvme(int unit, int64_t step, float grad_scale) {
  const size_t esize = ctx_->esize;
  const char* grads = states_->OwnedGrads(unit);
  char* updated = UpdatedPiece(unit);
  const size_t first = ctx_->owned_offset(unit);
  absl::Status stepped = state_file_->Run(
      unit, StateFile::Pass::kUpdate, [&](size_t at, size_t n, std::span<float* const> planes) {
        std::vector<std::span<float>> state;
        for (size_t p = 1; p < planes.size(); ++p) state.emplace_back(planes[p], n);
        RETURN_IF_ERROR(RunOptimizerOn({planes[0], n}, first + at, state, grads + at * esize,
                                       ctx_->mixed ? updated + at * esize : nullptr, step,
                                       GradScale{grad_scale}, /*on_stream=*/false));
        if (!ctx_->mixed) std::memcpy(updated + at * esize, planes[0], n * sizeof(float));
        return absl::OkStatus();
      });
  return Annotate(stepped, absl::StrFormat("rank %d: step of unit %d", ctx_->rank, unit));
}

absl::Status Engine::WriteMaster(int unit, size_t offset, const float* values, size_t count) {
  if (state_file_ == nullptr) {
    return ctx_->stream->Copy(states_->MasterPiece(unit) + offset, values, count * sizeof(float));
  }
  // An update, not a write: the optimizer state beside it stays.
  return state_file_->Run(unit, offset, count, StateFile::Pass::kUpdate,
                          [&](size_t at, size_t n, std::span<float* const> planes) {
                            std::memcpy(planes[0], values + (at - offset), n * sizeof(float));
                            return absl::OkStatus();
                          });
}

absl::Status Engine::NarrowMaster(int unit, char* to) {
  return state_file_->Run(unit, StateFile::Pass::kRead,
                          [&](size_t at, size_t n, std::span<float* const> planes) {
                            Narrow(planes[0], to + at * ctx_->esize, ctx_->dtype, n);
                            return absl::OkStatus();
                          });
}

std::string Engine::nvme_file() const {
  return state_file_ != nullptr ? state_file_->path() : std::string();
}

absl::Status Engine::StreamOwnedState(int unit, StateAccess access, StateFile::ChunkFn fn) {
  const bool known = unit >= 0 && unit < ctx_->unit_count();
  return StreamOwnedState(unit, 0, known ? ctx_->unit(unit).shard : 0, access, fn);
}

absl::Status Engine::StreamOwnedState(int unit, size_t begin, size_t count, StateAccess access,
                                      StateFile::ChunkFn fn) {
  if (unit < 0 || unit >= ctx_->unit_count() || begin + count > ctx_->unit(unit).shard ||
      begin + count < begin) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no elements [%d, %d) in the owned piece of unit %d (%d units)", begin, begin + count,
        unit, ctx_->unit_count()));
  }
  // offload_overlap's worker may be stepping this state (and owns the file's
  // staging) until Step.
  RETURN_IF_ERROR(NotUpdatedEarly());
  AwaitOwnedStateReader();
  if (!ctx_->has_bytes || count == 0) return absl::OkStatus();
  if (state_file_ != nullptr) return state_file_->Run(unit, begin, count, access, fn);
  if (ctx_->on_card() && !ctx_->offload()) {
    return absl::FailedPreconditionError(
        "the owned state is in card memory: copy it from owned_state() on stream()");
  }
  RETURN_IF_ERROR(ctx_->stream->Synchronize());
  OwnedState owned = owned_state(unit);
  std::vector<float*> planes = {owned.master + begin};
  for (float* state : owned.state) planes.push_back(state + begin);
  return fn(begin, count, planes);
}

}  // namespace zero
