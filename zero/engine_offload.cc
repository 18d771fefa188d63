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
    const size_t capacity = config_.host_capacity > 0 ? config_.host_capacity
                                                      : DefaultHostCapacity(devices_->kind());
    ASSIGN_OR_RETURN(own_host_pool_, PinnedHostPool::Create(devices_, capacity));
    upstream = own_host_pool_.get();
  }
  host_ = std::make_unique<StatisticsAdaptor>(upstream);
  worker_ = std::make_unique<SerialWorker>();
  return absl::OkStatus();
}

bool Engine::UpdatesEarly() const {
  return offload() && config_.offload_overlap && config_.max_grad_norm == 0 && !scaler_ &&
         micro_batches_ == config_.gradient_accumulation_steps - 1;
}

absl::Status Engine::StepOnHost(int unit, int64_t step, float grad_scale) {
  if (!has_bytes()) return absl::OkStatus();
  const Unit& u = layout_.units()[unit];
  float* master = MasterPiece(unit);
  const bool params_home = config_.offload == Offload::kParameters;
  void* copy = nullptr;
  if (mixed_) copy = params_home ? ModelPiece(unit) : At(host_params_, u.shard_offset);
  RETURN_IF_ERROR(RunOptimizer(unit, {master, u.shard}, u.shard_offset, copy, step, grad_scale,
                               /*on_card=*/false));
  // fp32 parameters kept on the host are the master's copy.
  if (!mixed_ && params_home) std::memcpy(ModelPiece(unit), master, u.shard * sizeof(float));
  return absl::OkStatus();
}

absl::Status Engine::PublishUnit(int unit) {
  if (config_.offload == Offload::kParameters) return absl::OkStatus();
  const Unit& u = layout_.units()[unit];
  if (has_bytes()) {
    const void* updated = mixed_ ? static_cast<const void*>(At(host_params_, u.shard_offset))
                                 : MasterPiece(unit);
    RETURN_IF_ERROR(stream_->Copy(ModelPiece(unit), updated, u.shard * esize_));
  }
  if (config_.stage == 3) return absl::OkStatus();
  return comm_->AllGather(ModelPiece(unit), At(params_, u.offset), u.shard, dtype_, stream_);
}

// Steps whatever the overlap did not, then brings the parameters up.
absl::Status Engine::UpdateOffloaded(float grad_scale) {
  if (updated_early_) {
    updated_early_ = false;
    RETURN_IF_ERROR(worker_->Wait());
  } else {
    RETURN_IF_ERROR(stream_->Synchronize());
    for (int u = 0; u < static_cast<int>(layout_.units().size()); ++u) {
      RETURN_IF_ERROR(StepOnHost(u, steps_, grad_scale));
    }
  }
  for (int u = 0; u < static_cast<int>(layout_.units().size()); ++u) {
    RETURN_IF_ERROR(PublishUnit(u));
  }
  return absl::OkStatus();
}

}  // namespace zero
