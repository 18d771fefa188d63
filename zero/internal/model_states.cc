#include "zero/internal/model_states.h"

#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
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

absl::StatusOr<std::unique_ptr<ModelStates>> ModelStates::Allocate(const RankContext& ctx,
                                                                   const Placement& placement,
                                                                   MemoryResource* host,
                                                                   int state_buffers) {
  std::unique_ptr<ModelStates> states(new ModelStates(ctx));
  // The file stages its chunks in pinned host memory too.
  if (placement.bytes(Home::kHost) > 0 || placement.bytes(Home::kNvme) > 0) {
    RETURN_IF_ERROR(states->CreateHostMemory(host));
  }
  if (placement.bytes(Home::kNvme) > 0) RETURN_IF_ERROR(states->CreateStateFile(state_buffers));
  host = states->host_.get();
  states->state_.resize(placement.InMemory()[State::kOptimizer].count);
  const std::pair<State, Buffer*> buffers[] = {
      {State::kParams, &states->params_},           {State::kMaster, &states->master_},
      {State::kHostParams, &states->host_params_}, {State::kGrads, &states->grads_},
      {State::kOwnedGrads, &states->owned_grads_}};
  auto place = [&](const Placed& p, Buffer& b) {
    return states->AllocateZeroed(b, p.home == Home::kHost ? host : ctx.pool, p);
  };
  const Placement in_memory = placement.InMemory();
  for (const auto& [state, buffer] : buffers) {
    if (in_memory[state].home != Home::kNone) RETURN_IF_ERROR(place(in_memory[state], *buffer));
  }
  for (Buffer& s : states->state_) RETURN_IF_ERROR(place(in_memory[State::kOptimizer], s));
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  return states;
}

ModelStates::~ModelStates() = default;

absl::Status ModelStates::CreateHostMemory(MemoryResource* upstream) {
  if (upstream == nullptr) {
    const size_t configured = ctx_.config.host_capacity;
    const size_t capacity =
        configured > 0 ? configured : DefaultHostCapacity(ctx_.devices->kind());
    ASSIGN_OR_RETURN(own_host_pool_, PinnedHostPool::Create(ctx_.devices, capacity));
    upstream = own_host_pool_.get();
  }
  host_ = std::make_unique<StatisticsAdaptor>(upstream);
  return absl::OkStatus();
}

absl::Status ModelStates::CreateStateFile(int state_buffers) {
  const EngineConfig& c = ctx_.config;
  std::vector<size_t> pieces;
  for (int u = 0; u < ctx_.unit_count(); ++u) pieces.push_back(ctx_.unit(u).shard);
  absl::StatusOr<std::unique_ptr<StateFile>> file =
      StateFile::Create(1 + state_buffers, std::move(pieces), host_.get(),
                        {.folder = c.nvme_path,
                         .chunk_elements = c.nvme_chunk_elements,
                         .direct_io = true,
                         .has_bytes = ctx_.has_bytes,
                         .write_fault = nullptr});
  if (!file.ok()) {
    return Annotate(file.status(),
                    absl::StrFormat("rank %d: optimizer state on NVMe", ctx_.rank));
  }
  state_file_ = *std::move(file);
  return absl::OkStatus();
}

absl::Status ModelStates::AllocateZeroed(Buffer& b, MemoryResource* from, const Placed& placed) {
  ASSIGN_OR_RETURN(b, Buffer::Allocate(from, placed.bytes, placed.tag, ctx_.stream));
  return ctx_.has_bytes ? ctx_.stream->Fill(b.data(), 0, placed.bytes) : absl::OkStatus();
}

char* ModelStates::WholeParams(int unit) const {
  if (ctx_.config.stage == 3) return nullptr;
  return ctx_.At(params_, ctx_.unit(unit).offset);
}

char* ModelStates::ModelPiece(int unit) const {
  const Unit& u = ctx_.unit(unit);
  return ctx_.At(params_, ctx_.config.stage == 3 ? u.shard_offset : ctx_.owned_offset(unit));
}

float* ModelStates::MasterPiece(int unit) const {
  if (ctx_.master_apart) return master_.data<float>() + OwnedStateOffset(unit);
  return reinterpret_cast<float*>(ModelPiece(unit));
}

char* ModelStates::HostModelPiece(int unit) const {
  return ctx_.At(host_params_, ctx_.unit(unit).shard_offset);
}

char* ModelStates::CpuStepPiece(int unit) const {
  if (ctx_.config.offload == Offload::kParameters) return ModelPiece(unit);
  if (ctx_.mixed || state_file_ != nullptr) return HostModelPiece(unit);
  return reinterpret_cast<char*>(MasterPiece(unit));
}

char* ModelStates::WholeGrads(int unit) const {
  return ctx_.At(grads_, ctx_.unit(unit).offset);
}

char* ModelStates::OwnedGrads(int unit) const {
  if (ctx_.config.stage == 0) return WholeGrads(unit);
  if (!owned_grads_) return ctx_.At(grads_, ctx_.owned_offset(unit));
  return ctx_.At(owned_grads_, ctx_.unit(unit).shard_offset);
}

char* ModelStates::OwnedGradPiece(int unit) const {
  if (ctx_.config.stage == 0) return ctx_.At(grads_, ctx_.owned_offset(unit));
  return OwnedGrads(unit);
}

size_t ModelStates::StateOffset(int unit) const {
  return ctx_.config.stage == 0 ? ctx_.unit(unit).offset : ctx_.unit(unit).shard_offset;
}

size_t ModelStates::OwnedStateOffset(int unit) const {
  return ctx_.config.stage == 0 ? ctx_.owned_offset(unit) : ctx_.unit(unit).shard_offset;
}

std::vector<std::span<float>> ModelStates::StateAt(size_t offset, size_t count) const {
  std::vector<std::span<float>> spans;
  for (const Buffer& s : state_) spans.emplace_back(s.data<float>() + offset, count);
  return spans;
}

ModelStates::Owned ModelStates::OwnedPieces(int unit) const {
  Owned owned{.master = nullptr, .state = {}};
  if (unit < 0 || unit >= ctx_.unit_count()) return owned;  // no such unit: nothing
  if (state_file_ != nullptr) {  // in the file: StreamOwned
    owned.state.assign(state_file_->planes() - 1, nullptr);
    return owned;
  }
  if (!ctx_.has_bytes) {
    owned.state.assign(state_.size(), nullptr);
    return owned;
  }
  owned.master = MasterPiece(unit);
  const size_t offset = OwnedStateOffset(unit);
  for (const Buffer& s : state_) owned.state.push_back(s.data<float>() + offset);
  return owned;
}

absl::Status ModelStates::StreamOwned(int unit, size_t begin, size_t count,
                                      StateFile::Pass access, StateFile::ChunkFn fn) {
  if (!ctx_.has_bytes || count == 0) return absl::OkStatus();
  if (state_file_ != nullptr) return state_file_->Run(unit, begin, count, access, fn);
  if (ctx_.on_card() && !ctx_.offload()) {
    return absl::FailedPreconditionError(
        "the owned state is in card memory: copy it from owned_state() on stream()");
  }
  RETURN_IF_ERROR(ctx_.stream->Synchronize());
  Owned owned = OwnedPieces(unit);
  std::vector<float*> planes = {owned.master + begin};
  for (float* state : owned.state) planes.push_back(state + begin);
  return fn(begin, count, planes);
}

absl::Status ModelStates::WriteMaster(int unit, size_t offset, const float* values,
                                      size_t count) {
  if (state_file_ == nullptr) {
    return ctx_.stream->Copy(MasterPiece(unit) + offset, values, count * sizeof(float));
  }
  // An update, not a write: the optimizer state beside it stays.
  return state_file_->Run(unit, offset, count, StateFile::Pass::kUpdate,
                          [&](size_t at, size_t n, std::span<float* const> planes) {
                            std::memcpy(planes[0], values + (at - offset), n * sizeof(float));
                            return absl::OkStatus();
                          });
}

absl::Status ModelStates::NarrowMaster(int unit, char* to) {
  return state_file_->Run(unit, StateFile::Pass::kRead,
                          [&](size_t at, size_t n, std::span<float* const> planes) {
                            Narrow(planes[0], to + at * ctx_.esize, ctx_.dtype, n);
                            return absl::OkStatus();
                          });
}

}  // namespace zero
