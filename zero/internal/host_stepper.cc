#include "zero/internal/host_stepper.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero {

HostStepper::~HostStepper() { (void)worker_.Wait(); }

absl::Status HostStepper::OnUnitReduced(int unit, bool last_micro_batch, int64_t step,
                                        float mean_scale) {
  const EngineConfig& c = ctx_.config;
  // Clipping and loss scaling need every gradient before the first update.
  const bool early = c.offload_overlap && c.max_grad_norm == 0 &&
                     c.param_dtype != DType::kF16 && last_micro_batch;
  if (!early) return absl::OkStatus();
  guard_.Await();
  // The unit's reduced gradients are written on the communication stream:
  // the CPU step waits for them there, not for the whole stream.
  ASSIGN_OR_RETURN(std::shared_ptr<Event> reduced, ctx_.comm_stream->Record());
  worker_.Post([this, unit, step, mean_scale, reduced] {
    RETURN_IF_ERROR(reduced->Synchronize());
    return StepOnHost(unit, step, mean_scale);
  });
  updated_early_ = true;
  ++early_updates_;
  return absl::OkStatus();
}

absl::Status HostStepper::StepOnHost(int unit, int64_t step, float scale) {
  if (!ctx_.has_bytes) return absl::OkStatus();
  if (states_.state_file() != nullptr) return StepOnNvme(unit, step, scale);
  const Unit& u = ctx_.unit(unit);
  float* master = states_.MasterPiece(unit);
  char* updated = states_.CpuStepPiece(unit);
  const std::vector<std::span<float>> state = states_.StateAt(u.shard_offset, u.shard);
  RETURN_IF_ERROR(UpdateOnHost(ctx_, optimizer_,
                               {.master = {master, u.shard},
                                .first_element = ctx_.owned_offset(unit),
                                .state = state,
                                .grads = states_.OwnedGrads(unit),
                                .copy = ctx_.mixed ? updated : nullptr,
                                .step = step,
                                .scale = GradScale{scale}}));
  // fp32 parameters kept on the host are the master's copy.
  if (!ctx_.mixed && updated != reinterpret_cast<char*>(master)) {
    std::memcpy(updated, master, u.shard * sizeof(float));
  }
  return absl::OkStatus();
}

// The same optimizer call as StepOnHost, one chunk at a time while the next
// is read and the previous written (StateFile::Run).
absl::Status HostStepper::StepOnNvme(int unit, int64_t step, float scale) {
  const size_t esize = ctx_.esize;
  const char* grads = states_.OwnedGrads(unit);
  char* updated = states_.CpuStepPiece(unit);
  const size_t first = ctx_.owned_offset(unit);
  absl::Status stepped = states_.state_file()->Run(
      unit, StateFile::Pass::kUpdate, [&](size_t at, size_t n, std::span<float* const> planes) {
        std::vector<std::span<float>> state;
        for (size_t p = 1; p < planes.size(); ++p) state.emplace_back(planes[p], n);
        RETURN_IF_ERROR(UpdateOnHost(ctx_, optimizer_,
                                     {.master = {planes[0], n},
                                      .first_element = first + at,
                                      .state = state,
                                      .grads = grads + at * esize,
                                      .copy = ctx_.mixed ? updated + at * esize : nullptr,
                                      .step = step,
                                      .scale = GradScale{scale}}));
        if (!ctx_.mixed) std::memcpy(updated + at * esize, planes[0], n * sizeof(float));
        return absl::OkStatus();
      });
  return Annotate(stepped, absl::StrFormat("rank %d: step of unit %d", ctx_.rank, unit));
}

absl::Status HostStepper::PublishUnit(int unit) {
  if (ctx_.config.offload == Offload::kParameters) return absl::OkStatus();
  const Unit& u = ctx_.unit(unit);
  if (ctx_.has_bytes) {
    RETURN_IF_ERROR(ctx_.stream->Copy(states_.ModelPiece(unit), states_.CpuStepPiece(unit),
                                      u.shard * ctx_.esize));
  }
  if (ctx_.config.stage == 3) return absl::OkStatus();
  return gatherer_.Publish(unit);
}

absl::Status HostStepper::Update(int64_t step, GradScale scale) {
  if (updated_early_) {
    updated_early_ = false;
    RETURN_IF_ERROR(worker_.Wait());
  } else {
    // The CPU steps with a host value: the scale comes up with the wait
    // for the gradients (value is 1 with a device scale).
    float value = scale.value;
    if (scale.at != nullptr) RETURN_IF_ERROR(ctx_.stream->Copy(&value, scale.at, sizeof(value)));
    RETURN_IF_ERROR(ctx_.stream->Synchronize());
    for (int u = 0; u < ctx_.unit_count(); ++u) RETURN_IF_ERROR(StepOnHost(u, step, value));
  }
  for (int u = 0; u < ctx_.unit_count(); ++u) RETURN_IF_ERROR(PublishUnit(u));
  return absl::OkStatus();
}

absl::Status HostStepper::Settled(std::string_view what) const {
  if (!updated_early_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "rank %d: %s between backward and Step: offload_overlap already steps this step's units "
      "as their gradients arrive, with the optimizer's settings as they were, so the owned "
      "state is part old, part new: call Step first (a scheduler's step() after "
      "optimizer.step() changes the lr in time), or turn offload_overlap off",
      ctx_.rank, what));
}

}  // namespace zero
