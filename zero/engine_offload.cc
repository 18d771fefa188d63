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

absl::Status Engine::StepOnHost(int unit, int64_t step, float grad_scale) {
  if (!ctx_->has_bytes) return absl::OkStatus();
  const Unit& u = ctx_->unit(unit);
  float* master = states_->MasterPiece(unit);
  const bool params_home = ctx_->config.offload == Offload::kParameters;
  void* copy = nullptr;
  if (ctx_->mixed) copy = params_home ? states_->ModelPiece(unit) : states_->HostModelPiece(unit);
  RETURN_IF_ERROR(RunOptimizer(unit, {master, u.shard}, u.shard_offset, copy, step,
                               GradScale{grad_scale}, /*on_card=*/false));
  // fp32 parameters kept on the host are the master's copy.
  if (!ctx_->mixed && params_home) {
    std::memcpy(states_->ModelPiece(unit), master, u.shard * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status Engine::PublishUnit(int unit) {
  if (ctx_->config.offload == Offload::kParameters) return absl::OkStatus();
  const Unit& u = ctx_->unit(unit);
  if (ctx_->has_bytes) {
    const void* updated = ctx_->mixed ? static_cast<const void*>(states_->HostModelPiece(unit))
                                      : states_->MasterPiece(unit);
    RETURN_IF_ERROR(ctx_->stream->Copy(states_->ModelPiece(unit), updated, u.shard * ctx_->esize));
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

}  // namespace zero
