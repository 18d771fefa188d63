#include "zero/engine.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "memory/status_macros.h"

namespace zero {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                       std::vector<ParamSpec> params,
                                                       Optimizer* optimizer, Communicator* comm,
                                                       DeviceSystem* devices, int device) {
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
      new Engine(config, *std::move(layout), optimizer, comm, devices, device));
  const EngineConfig& c = engine->config_;
  const uint64_t settings[] = {engine->layout_.Fingerprint(), uint64_t(c.stage),
                               uint64_t(c.gradient_accumulation_steps), c.persistence_threshold};
  RETURN_IF_ERROR(engine->CheckAgreement(Fnv1a(settings, sizeof settings),
                                         "the parameter layout or config"));
  RETURN_IF_ERROR(engine->AllocateModelStates());
  RETURN_IF_ERROR(engine->InitModules());
  return engine;
}

Engine::Engine(const EngineConfig& config, Layout layout, Optimizer* optimizer,
               Communicator* comm, DeviceSystem* devices, int device)
    : config_(config),
      layout_(std::move(layout)),
      optimizer_(optimizer),
      comm_(comm),
      devices_(devices),
      pool_(&devices->pool(device)),
      stream_(devices->default_stream(device)),
      rank_(comm->rank()),
      units_(layout_.units().size()),
      received_(layout_.params().size(), 0),
      next_unit_to_reduce_(static_cast<int>(layout_.units().size()) - 1) {}

Engine::~Engine() { (void)stream_->Synchronize(); }

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

absl::Status Engine::AllocateModelStates() {
  const size_t full = layout_.padded_numel() * sizeof(float);
  const size_t shard = layout_.shard_numel() * sizeof(float);
  auto alloc = [&](Buffer& b, size_t bytes, Tag tag) -> absl::Status {
    ASSIGN_OR_RETURN(b, Buffer::Allocate(pool_, bytes, tag, stream_));
    // Padding must hold zeros: it is summed, updated and gathered like the rest.
    return has_bytes() ? stream_->Fill(b.data(), 0, bytes) : absl::OkStatus();
  };
  RETURN_IF_ERROR(alloc(params_, config_.stage == 3 ? shard : full, Tag::kParameters));
  if (config_.stage <= 1) RETURN_IF_ERROR(alloc(grads_, full, Tag::kGradients));
  if (config_.stage >= 2 || (config_.stage == 1 && config_.gradient_accumulation_steps > 1)) {
    RETURN_IF_ERROR(alloc(owned_grads_, shard, Tag::kGradients));
  }
  state_.resize(optimizer_->state_buffers());
  for (Buffer& s : state_) {
    RETURN_IF_ERROR(alloc(s, config_.stage == 0 ? full : shard, Tag::kOptimizerState));
  }
  return stream_->Synchronize();
}

absl::StatusOr<std::span<float>> Engine::param(int id) {
  if (id < 0 || id >= static_cast<int>(layout_.params().size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no parameter #%d (%d are registered)", id, layout_.params().size()));
  }
  const ParamSlot& p = layout_.params()[id];
  float* unit = param_data(p.unit);
  if (unit == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "parameter '%s' is not gathered: Fetch module %d first", p.name, p.module));
  }
  return std::span<float>(unit + (p.offset - layout_.units()[p.unit].offset), p.numel);
}

absl::Status Engine::SetParam(int id, std::span<const float> values) {
  if (id < 0 || id >= static_cast<int>(layout_.params().size()) ||
      values.size() != layout_.params()[id].numel) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SetParam(#%d) with %d values does not match a registered parameter", id, values.size()));
  }
  const ParamSlot& p = layout_.params()[id];
  const Unit& u = layout_.units()[p.unit];
  if (!has_bytes()) return absl::OkStatus();
  if (float* whole = param_data(p.unit); whole != nullptr) {
    RETURN_IF_ERROR(stream_->Copy(whole + (p.offset - u.offset), values.data(), values.size_bytes()));
  }
  if (config_.stage == 3) {
    for (const Piece& piece : layout_.PiecesOf(id)) {
      if (piece.rank != rank_) continue;
      RETURN_IF_ERROR(stream_->Copy(params_.data<float>() + piece.shard_offset,
                                    values.data() + piece.param_offset, piece.count * 4));
    }
  }
  return stream_->Synchronize();
}

size_t Engine::owned_offset(int unit) const {
  const Unit& u = layout_.units()[unit];
  return u.offset + rank_ * u.shard;
}

absl::Status Engine::Step() {
  const int gas = config_.gradient_accumulation_steps;
  const int partial = static_cast<int>(
      std::count(received_.begin(), received_.end(), uint8_t{1}));
  if (micro_batches_ != gas || partial > 0) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < received_.size() && missing.size() < 5; ++i) {
      if (!received_[i]) missing.push_back("'" + layout_.params()[i].name + "'");
    }
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: Step before every gradient arrived: %d of %d micro-batches complete%s",
        rank_, micro_batches_, gas,
        partial > 0 ? absl::StrFormat(", micro-batch %d still lacks %s", micro_batches_ + 1,
                                      absl::StrJoin(missing, ", "))
                    : std::string())));
  }
  ++steps_;
  float grad_scale = 1.0f / static_cast<float>(layout_.world_size() * gas);
  if (config_.max_grad_norm > 0) {
    absl::StatusOr<double> norm = GlobalGradNorm(grad_scale);
    if (!norm.ok()) return Fail(norm.status());
    last_grad_norm_ = *norm;
    const double coef = config_.max_grad_norm / (*norm + 1e-6);  // torch's clip_grad_norm_
    if (coef < 1.0) grad_scale = static_cast<float>(grad_scale * coef);
  }
  for (int u = 0; u < static_cast<int>(layout_.units().size()); ++u) {
    if (absl::Status s = UpdateUnit(u, grad_scale); !s.ok()) return Fail(s);
  }
  micro_batches_ = 0;
  if (config_.stage == 3) {
    if (absl::Status s = FinishStepStage3(); !s.ok()) return Fail(s);
  }
  return absl::OkStatus();
}

// Updates the parameters a rank owns in `unit`, then (stages 1-2) gathers
// every rank's updated piece so each holds the whole unit again.
absl::Status Engine::UpdateUnit(int unit, float grad_scale) {
  const Unit& u = layout_.units()[unit];
  const bool whole = config_.stage == 0;
  const size_t count = whole ? u.padded : u.shard;
  const size_t state_offset = whole ? u.offset : u.shard_offset;
  float* params = config_.stage == 3 ? params_.data<float>() + u.shard_offset
                                     : params_full() + (whole ? u.offset : owned_offset(unit));
  if (has_bytes()) {
    std::vector<std::span<float>> state;
    for (Buffer& s : state_) state.emplace_back(s.data<float>() + state_offset, count);
    StepArgs args{.params = {params, count},
                  .grads = OwnedGrad(unit),
                  .grad_dtype = DType::kF32,
                  .state = state,
                  .step = steps_,
                  .grad_scale = grad_scale};
    if (devices_->kind() == DeviceKind::kCuda) {
      RETURN_IF_ERROR(optimizer_->StepCuda(args, stream_->native_handle()));
    } else {
      RETURN_IF_ERROR(stream_->Synchronize());
      RETURN_IF_ERROR(optimizer_->Step(args));
    }
  }
  // Stage 3 keeps its pieces; they are gathered when next fetched.
  if (whole || config_.stage == 3) return absl::OkStatus();
  return comm_->AllGather(params, params_full() + u.offset, u.shard, DType::kF32, stream_);
}

absl::Status Engine::ZeroGrad() {
  ResetMicroBatch();
  micro_batches_ = 0;
  return absl::OkStatus();
}

EngineStats Engine::stats() const {
  return EngineStats{.steps = steps_,
                     .last_grad_norm = last_grad_norm_,
                     .micro_batches = micro_batches_,
                     .pool = pool_->stats(),
                     .comm = comm_->stats()};
}

}  // namespace zero
