#include "zero/engine.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "zero/placement.h"
#include "zero/precision.h"

namespace zero {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                       std::vector<ParamSpec> params,
                                                       Optimizer* optimizer, Communicator* comm,
                                                       DeviceSystem* devices, int device,
                                                       EngineMemory memory) {
  absl::Status status = ValidateConfig(config);
  if (status.ok() && (optimizer == nullptr || comm == nullptr || devices == nullptr)) {
    status = absl::InvalidArgumentError("optimizer, communicator and devices are required");
  }
  if (status.ok() && (device < 0 || device >= devices->device_count())) {
    status = absl::InvalidArgumentError(absl::StrFormat("no device %d", device));
  }
  absl::StatusOr<Layout> layout =
      status.ok() ? Layout::Create(std::move(params), comm->world_size(), config.bucket_elements,
                                   config.stage == 3)
                  : status;
  if (!layout.ok()) {
    // The peers are about to wait for this rank in the layout check.
    if (comm != nullptr) comm->Abort(layout.status());
    return layout.status();
  }
  std::unique_ptr<Engine> engine(
      new Engine(config, *std::move(layout), optimizer, comm, devices, device, memory));
  const EngineConfig& c = engine->config_;
  if (c.param_dtype == DType::kF16) {
    absl::StatusOr<LossScaler> scaler = LossScaler::Create(c.loss_scaler);
    if (!scaler.ok()) return engine->Fail(scaler.status());
    engine->scaler_ = *scaler;
  }
  const uint64_t settings[] = {engine->layout_.Fingerprint(), uint64_t(c.stage),
                               uint64_t(c.gradient_accumulation_steps), c.persistence_threshold,
                               uint64_t(c.param_dtype)};
  RETURN_IF_ERROR(engine->CheckAgreement(Fnv1a(settings, sizeof settings),
                                         "the parameter layout or config"));
  RETURN_IF_ERROR(engine->AllocateModelStates());
  RETURN_IF_ERROR(engine->InitModules());
  return engine;
}

Engine::Engine(const EngineConfig& config, Layout layout, Optimizer* optimizer,
               Communicator* comm, DeviceSystem* devices, int device, EngineMemory memory)
    : config_(config),
      layout_(std::move(layout)),
      optimizer_(optimizer),
      comm_(comm),
      devices_(devices),
      device_pool_(&devices->pool(device)),
      pool_(memory.device != nullptr ? memory.device : device_pool_),
      stream_(devices->default_stream(device)),
      rank_(comm->rank()),
      dtype_(config.param_dtype),
      esize_(SizeOf(config.param_dtype)),
      mixed_(config.param_dtype != DType::kF32),
      master_apart_(mixed_ || config.offload != Offload::kNone),
      host_upstream_(memory.host),
      units_(layout_.units().size()),
      received_(layout_.params().size(), 0),
      next_unit_to_reduce_(static_cast<int>(layout_.units().size()) - 1) {}

Engine::~Engine() {
  if (worker_) (void)worker_->Wait();
  (void)stream_->Synchronize();
}

absl::Status Engine::Fail(absl::Status status) {
  comm_->Abort(status);
  return status;
}

// Each compares the same gathered values, so all ranks fail alike. Meta
// devices move no bytes: there the check is left to the collective sequence.
absl::Status Engine::CheckAgreement(uint64_t mine, const std::string& what) {
  const int n = layout_.world_size();
  if (!has_bytes() || n == 1) return absl::OkStatus();
  std::vector<uint64_t> host(n);
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(pool_, n * sizeof(uint64_t),
                                                Tag::kCommunication, stream_));
  uint64_t* slot = all.data<uint64_t>() + rank_;
  RETURN_IF_ERROR(stream_->Copy(slot, &mine, sizeof mine));
  // Two fp32 lanes per fingerprint: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(comm_->AllGather(slot, all.data(), 2, DType::kF32, stream_));
  RETURN_IF_ERROR(stream_->Copy(host.data(), all.data(), n * sizeof(uint64_t)));
  RETURN_IF_ERROR(stream_->Synchronize());
  std::vector<std::string> differ;
  for (int r = 1; r < n; ++r) {
    if (host[r] != host[0]) differ.push_back(absl::StrFormat("%d", r));
  }
  if (differ.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "ranks disagree on %s: rank(s) %s differ from rank 0", what, absl::StrJoin(differ, ", ")));
}

// Padding must hold zeros: it is summed, updated and gathered like the rest.
absl::Status Engine::AllocateZeroed(Buffer& b, MemoryResource* from, size_t bytes, Tag tag) {
  ASSIGN_OR_RETURN(b, Buffer::Allocate(from, bytes, tag, stream_));
  return has_bytes() ? stream_->Fill(b.data(), 0, bytes) : absl::OkStatus();
}

// Allocates what PlaceStates says, where it says (zero/placement.h holds
// the per-stage rules and the paper's formulas).
absl::Status Engine::AllocateModelStates() {
  const Placement placement = PlaceStates(config_, optimizer_->state_buffers(),
                                          layout_.padded_numel(), layout_.shard_numel());
  if (placement.bytes(Home::kHost) > 0) RETURN_IF_ERROR(CreateHostMemory());
  state_.resize(placement[State::kOptimizer].count);
  const std::pair<State, Buffer*> buffers[] = {
      {State::kParams, &params_},         {State::kMaster, &master_},
      {State::kHostParams, &host_params_}, {State::kGrads, &grads_},
      {State::kOwnedGrads, &owned_grads_}};
  auto place = [&](const Placed& p, Buffer& b) {
    MemoryResource* from = p.home == Home::kHost ? host_.get() : pool_;
    return AllocateZeroed(b, from, p.bytes, p.tag);
  };
  for (const auto& [state, buffer] : buffers) {
    if (placement[state].home != Home::kNone) RETURN_IF_ERROR(place(placement[state], *buffer));
  }
  for (Buffer& s : state_) RETURN_IF_ERROR(place(placement[State::kOptimizer], s));
  return stream_->Synchronize();
}

absl::StatusOr<Engine::ParamView> Engine::param_view(int id) {
  if (id < 0 || id >= static_cast<int>(layout_.params().size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no parameter #%d (%d are registered)", id, layout_.params().size()));
  }
  const ParamSlot& p = layout_.params()[id];
  char* unit = param_data(p.unit);
  if (unit == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "parameter '%s' is not gathered: Fetch module %d first", p.name, p.module));
  }
  return ParamView{unit + (p.offset - layout_.units()[p.unit].offset) * esize_, p.numel, dtype_};
}

absl::StatusOr<std::span<float>> Engine::param(int id) {
  ASSIGN_OR_RETURN(ParamView view, param_view(id));
  if (view.dtype != DType::kF32) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "parameters are %s: use param_view", std::string(Name(view.dtype))));
  }
  return std::span<float>(static_cast<float*>(view.data), view.numel);
}

absl::Status Engine::SetParam(int id, std::span<const float> values) {
  if (id < 0 || id >= static_cast<int>(layout_.params().size()) ||
      values.size() != layout_.params()[id].numel) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SetParam(#%d) with %d values does not match a registered parameter", id, values.size()));
  }
  if (!has_bytes()) return absl::OkStatus();
  const ParamSlot& p = layout_.params()[id];
  const Unit& u = layout_.units()[p.unit];
  std::vector<char> narrow(values.size() * esize_);
  Narrow(values.data(), narrow.data(), dtype_, values.size());
  if (char* whole = param_data(p.unit); whole != nullptr) {
    RETURN_IF_ERROR(stream_->Copy(whole + (p.offset - u.offset) * esize_, narrow.data(),
                                  narrow.size()));
  }
  if (master_apart_ && config_.stage == 0) {
    RETURN_IF_ERROR(stream_->Copy(master_.data<float>() + p.offset, values.data(),
                                  values.size_bytes()));
  }
  for (const Piece& piece : layout_.PiecesOf(id)) {
    if (piece.rank != rank_ || (config_.stage < 3 && !master_apart_) || config_.stage == 0) {
      continue;
    }
    if (master_apart_) {
      RETURN_IF_ERROR(stream_->Copy(master_.data<float>() + piece.shard_offset,
                                    values.data() + piece.param_offset, piece.count * 4));
    }
    if (config_.stage == 3) {
      RETURN_IF_ERROR(stream_->Copy(At(params_, piece.shard_offset),
                                    narrow.data() + piece.param_offset * esize_,
                                    piece.count * esize_));
    }
  }
  return stream_->Synchronize();
}

size_t Engine::owned_offset(int unit) const {
  const Unit& u = layout_.units()[unit];
  return u.offset + rank_ * u.shard;
}

absl::Status Engine::ZeroGrad() {
  if (updated_early_) {
    return absl::FailedPreconditionError(
        "this step was already applied unit by unit as its gradients arrived (offload_overlap): "
        "call Step");
  }
  ResetMicroBatch();
  micro_batches_ = 0;
  return absl::OkStatus();
}

double Engine::loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }

EngineStats Engine::stats() const {
  const ResourceStatistics host = host_ ? host_->statistics() : ResourceStatistics{};
  return EngineStats{.steps = steps_,
                     .skipped_steps = skipped_steps_,
                     .loss_scale = loss_scale(),
                     .last_grad_norm = last_grad_norm_,
                     .micro_batches = micro_batches_,
                     .pool = device_pool_->stats(),
                     .host_bytes = static_cast<size_t>(host.bytes.current),
                     .peak_host_bytes = static_cast<size_t>(host.bytes.peak),
                     .early_unit_updates = early_unit_updates_,
                     .comm = comm_->stats()};
}

}  // namespace zero
