// The engine coordinates its parts over one RankContext: ModelStates (the
// buffers PlaceStates puts on device, host or NVMe), the GradientReducer
// (backward's side), the ParameterGatherer (stage 3's fetches), GradNorm
// (clipping) and, with offload, the HostStepper (the CPU step). What remains
// here is the public surface; the step is engine_step.cc, the checkpoint's
// face owned_state.cc.
#include "zero/engine.h"

#include <bit>
#include <chrono>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/fingerprint.h"
#include "base/status_macros.h"
#include "zero/buffer.h"
#include "zero/internal/grad_norm.h"
#include "zero/internal/gradient_reducer.h"
#include "zero/internal/host_stepper.h"
#include "zero/internal/model_states.h"
#include "zero/internal/parameter_gatherer.h"
#include "zero/internal/rank_agreement.h"
#include "zero/internal/rank_context.h"
#include "zero/placement.h"
#include "zero/precision.h"

namespace zero {

namespace {

// The communicator the states are sharded over and the replicas' (hybrid
// sharding), from a hierarchical communicator whose nodes are the groups.
absl::StatusOr<std::pair<Communicator*, Communicator*>> ShardGroups(const EngineConfig& config,
                                                                     Communicator* comm) {
  const int size = config.shard_group_size;
  if (size == 0 || size == comm->world_size()) return std::pair{comm, nullptr};
  const std::optional<Communicator::Levels> levels = comm->levels();
  if (!levels || levels->intra->world_size() != size) {
    const absl::Status error = absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: shard_group_size %d needs a hierarchical communicator with groups of that "
        "many ranks (this one has %s)",
        comm->rank(), size,
        levels ? absl::StrCat("groups of ", levels->intra->world_size()) : "one level"));
    comm->Abort(error);
    return error;
  }
  return std::pair{levels->intra, levels->inter};
}

}  // namespace

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
  Communicator* const whole = comm;
  Communicator* replicas = nullptr;
  if (status.ok()) {
    absl::StatusOr<std::pair<Communicator*, Communicator*>> groups = ShardGroups(config, comm);
    status = groups.status();
    if (groups.ok()) std::tie(comm, replicas) = *groups;
  }
  absl::StatusOr<Layout> layout =
      status.ok() ? Layout::Create(std::move(params), comm->world_size(), config.bucket_elements,
                                   config.stage == 3)
                  : status;
  absl::StatusOr<Stream*> comm_stream =
      !layout.ok() ? layout.status()
      : config.overlap_comm ? devices->CreateStream(device)
                            : devices->default_stream(device);
  if (!comm_stream.ok()) {
    // The peers are about to wait for this rank in the layout check.
    if (whole != nullptr) whole->Abort(comm_stream.status());
    return comm_stream.status();
  }
  const bool mixed = config.param_dtype != DType::kF32;
  RankContext ctx{.config = config,
                  .layout = *std::move(layout),
                  .comm = comm,
                  .replicas = replicas,
                  .whole = whole,
                  .devices = devices,
                  .pool = memory.device != nullptr ? memory.device : &devices->pool(device),
                  .stream = devices->default_stream(device),
                  .comm_stream = *comm_stream,
                  .elementwise = &ElementwiseExecutor::For(devices->kind()),
                  .rank = comm->rank(),
                  .dtype = config.param_dtype,
                  .esize = SizeOf(config.param_dtype),
                  .has_bytes = devices->backend().has_bytes(),
                  .mixed = mixed,
                  .master_apart = mixed || config.offload != Offload::kNone};
  std::unique_ptr<Engine> engine(new Engine(std::move(ctx), optimizer));
  RETURN_IF_ERROR(engine->Init(memory.host));
  return engine;
}

Engine::Engine(RankContext ctx, Optimizer* optimizer)
    : ctx_(std::make_unique<const RankContext>(std::move(ctx))),
      optimizer_(optimizer),
      device_pool_(&ctx_->devices->pool(ctx_->stream->device())),
      norm_(std::make_unique<GradNorm>(*ctx_)),
      ops_([counts = ctx_->stream->shared_counts()] { return counts->Read(); }) {}

Engine::~Engine() {
  guard_.Await();  // it reads this engine's buffers
  host_.reset();   // waits for its worker's steps
  (void)ctx_->comm_stream->Synchronize();
  (void)ctx_->stream->Synchronize();
}

absl::Status Engine::Init(MemoryResource* host_memory) {
  const EngineConfig& c = ctx_->config;
  if (c.param_dtype == DType::kF16) {
    absl::StatusOr<LossScaler> scaler = LossScaler::Create(c.loss_scaler);
    if (!scaler.ok()) return Fail(scaler.status());
    scaler_ = *scaler;
  }
  // Every setting that changes the collectives' order or what a replica
  // computes: ranks that differ in one would pair unlike calls (stage 3's
  // prefetch and live limits), or silently diverge (the loss scaler, the
  // clipping norm).
  auto bits = [](double x) { return std::bit_cast<uint64_t>(x); };
  const LossScalerConfig& ls = c.loss_scaler;
  const uint64_t settings[] = {ctx_->layout.Fingerprint(),
                               uint64_t(c.stage),
                               uint64_t(c.gradient_accumulation_steps),
                               c.persistence_threshold,
                               uint64_t(c.param_dtype),
                               bits(c.max_grad_norm),
                               c.reduce_chunk_elements,
                               uint64_t(c.offload),
                               uint64_t(c.offload_device),
                               c.prefetch_elements,
                               c.max_live_elements,
                               uint64_t(c.max_reuse_distance),
                               bits(ls.initial_scale),
                               bits(ls.growth_factor),
                               bits(ls.backoff_factor),
                               uint64_t(ls.growth_interval),
                               uint64_t(ls.hysteresis),
                               bits(ls.min_scale),
                               uint64_t(ls.consecutive_hysteresis),
                               uint64_t(ls.raise_error_at_min_scale),
                               uint64_t(c.quantized_weights_bits),
                               uint64_t(c.quantized_gradients_bits),
                               c.quantization_block,
                               uint64_t(c.stochastic_rounding),
                               uint64_t(c.error_feedback),
                               uint64_t(c.hpz_partition_size),
                               uint64_t(c.shard_group_size)};
  // From here a rank that fails aborts the group: its peers would wait for
  // it in the agreement or in their first collective.
  RETURN_IF_ERROR(FailIfError(CheckAgreement(*ctx_, Fnv1a(settings, sizeof settings),
                                             "the parameter layout or config")));
  // zero/placement.h holds the per-stage rules and the paper's formulas.
  const Placement placement = PlaceStates(c, optimizer_->state_buffers(),
                                          ctx_->layout.padded_numel(), ctx_->layout.shard_numel());
  absl::StatusOr<std::unique_ptr<ModelStates>> states =
      ModelStates::Allocate(*ctx_, placement, host_memory, optimizer_->state_buffers());
  RETURN_IF_ERROR(FailIfError(states.status()));
  states_ = *std::move(states);
  absl::StatusOr<std::unique_ptr<ParameterGatherer>> gatherer =
      ParameterGatherer::Create(*ctx_, *states_);
  RETURN_IF_ERROR(FailIfError(gatherer.status()));
  gatherer_ = *std::move(gatherer);
  reducer_ = std::make_unique<GradientReducer>(*ctx_, *states_,
                                               [this](int unit) { return OnUnitReduced(unit); });
  if (ctx_->offload()) {
    host_ = std::make_unique<HostStepper>(*ctx_, *states_, *gatherer_, *optimizer_, guard_);
  }
  return absl::OkStatus();
}

absl::Status Engine::OnUnitReduced(int unit) {
  if (host_ == nullptr) return absl::OkStatus();
  const int last = ctx_->config.gradient_accumulation_steps - 1;
  return host_->OnUnitReduced(unit, reducer_->micro_batches() == last, steps_ + 1,
                              MeanGradScale());
}

absl::Status Engine::Fail(absl::Status status) {
  ctx_->whole->Abort(status);
  return status;
}

const Layout& Engine::layout() const { return ctx_->layout; }
const EngineConfig& Engine::config() const { return ctx_->config; }
Stream* Engine::stream() const { return ctx_->stream; }
Stream* Engine::comm_stream() const { return ctx_->comm_stream; }

int Engine::replicas() const {
  return ctx_->replicas != nullptr ? ctx_->replicas->world_size() : 1;
}
size_t Engine::live_gathered_elements() const { return gatherer_->live_elements(); }

// Between BeginRestore and EndRestore the states are half rebuilt and the
// peers wait in RestoreUnit's gathers: any other call fails the group.
absl::Status Engine::NotRestoring(std::string_view call) {
  if (!owned_state_.restoring()) return absl::OkStatus();
  return Fail(absl::FailedPreconditionError(absl::StrFormat(
      "rank %d: %s between BeginRestore and EndRestore (%d of %d units restored)", ctx_->rank,
      call, owned_state_.restore_next_, ctx_->unit_count())));
}

absl::Status Engine::Fetch(int module, Stream* consumer) {
  RETURN_IF_ERROR(NotRestoring("Fetch"));
  return FailIfError(gatherer_->Fetch(module, consumer != nullptr ? consumer : ctx_->stream));
}
absl::Status Engine::AwaitFetchedOnHost(int module) {
  RETURN_IF_ERROR(gatherer_->AwaitFetchedOnHost(module));
  return ctx_->whole->AsyncError();
}
absl::Status Engine::Release(int module, Stream* consumer) {
  RETURN_IF_ERROR(NotRestoring("Release"));
  return FailIfError(gatherer_->Release(module, consumer != nullptr ? consumer : ctx_->stream));
}

absl::Status Engine::AwaitComm() { return RankContext::Order(ctx_->stream, ctx_->comm_stream); }

absl::Status Engine::AddGrad(int id, const void* grad, size_t numel, DType dtype,
                             std::shared_ptr<Event> ready, GradSource source) {
  RETURN_IF_ERROR(NotRestoring("AddGrad"));
  const bool on_device =
      source == GradSource::kDevice || ctx_->devices->device_of(grad).has_value();
  return HandOver([&] {
    return reducer_->Add(id, grad, numel, dtype, ready, on_device, steps_ + 1);
  });
}

absl::Status Engine::HandOver(absl::FunctionRef<absl::Status()> hand_over) {
  const int done = reducer_->micro_batches();
  RETURN_IF_ERROR(FailIfError(hand_over()));
  if (reducer_->micro_batches() != done) ops_.MicroBatchDone();
  return absl::OkStatus();
}

absl::StatusOr<void*> Engine::GradBuffer(int id, Stream* producer) {
  RETURN_IF_ERROR(NotRestoring("GradBuffer"));
  absl::StatusOr<char*> slot = reducer_->Slot(id, steps_ + 1);
  if (!slot.ok()) return Fail(slot.status());
  if (producer != nullptr &&
      (producer != ordered_producer_ || reducer_->readied() != ordered_at_readied_)) {
    // The pool's wait for a block last used on the communication stream,
    // the wait for the last reduction and the padding fill are on stream().
    // Once per readied unit, not per parameter: an order per parameter
    // would cost an event and a stream wait each.
    RETURN_IF_ERROR(FailIfError(RankContext::Order(producer, ctx_->stream)));
    ordered_producer_ = producer;
    ordered_at_readied_ = reducer_->readied();
  }
  return static_cast<void*>(*slot);
}

absl::Status Engine::GradWritten(int id, std::shared_ptr<Event> written) {
  RETURN_IF_ERROR(NotRestoring("GradWritten"));
  return HandOver([&] { return reducer_->Written(id, written, steps_ + 1); });
}

absl::StatusOr<Engine::ParamView> Engine::param_view(int id) {
  const Layout& layout = ctx_->layout;
  if (id < 0 || id >= static_cast<int>(layout.params().size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no parameter #%d (%d are registered)", id, layout.params().size()));
  }
  const ParamSlot& p = layout.params()[id];
  char* unit = gatherer_->Whole(p.unit);
  if (unit == nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "parameter '%s' is not gathered: Fetch module %d first", p.name, p.module));
  }
  RETURN_IF_ERROR(gatherer_->AwaitWhole(p.unit, ctx_->stream));
  return ParamView{unit + (p.offset - ctx_->unit(p.unit).offset) * ctx_->esize, p.numel,
                   ctx_->dtype};
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
  RETURN_IF_ERROR(NotRestoring("SetParam"));
  RETURN_IF_ERROR(OwnedStateSettled("SetParam"));  // the worker may be stepping the masters
  guard_.Await();
  const Layout& layout = ctx_->layout;
  if (id < 0 || id >= static_cast<int>(layout.params().size()) ||
      values.size() != layout.params()[id].numel) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SetParam(#%d) with %d values does not match a registered parameter", id, values.size()));
  }
  if (!ctx_->has_bytes) return absl::OkStatus();
  RETURN_IF_ERROR(AwaitComm());  // a gather in flight must not land after these writes
  std::vector<char> narrow(values.size() * ctx_->esize);
  Narrow(values.data(), narrow.data(), ctx_->dtype, values.size());
  const absl::Status written = WriteParam(id, values, narrow.data());
  // The copies read `values` and `narrow`, also when a later write failed.
  const absl::Status synced = ctx_->stream->Synchronize();
  return written.ok() ? synced : written;
}

// Enqueues SetParam's copies on the stream: this rank's master pieces
// first (on NVMe a pass over the file that can fail: then nothing else has
// changed), then the whole (or gathered) unit, stage 0's whole master and
// stage 3's model-dtype pieces.
absl::Status Engine::WriteParam(int id, std::span<const float> values, const char* narrow) {
  const Layout& layout = ctx_->layout;
  const ParamSlot& p = layout.params()[id];
  const size_t esize = ctx_->esize;
  const int stage = ctx_->config.stage;
  Stream* stream = ctx_->stream;
  auto owned = [&](const Piece& piece) {
    return piece.rank == ctx_->rank && (stage == 3 || ctx_->master_apart) && stage != 0;
  };
  for (const Piece& piece : layout.PiecesOf(id)) {
    if (!owned(piece) || !ctx_->master_apart) continue;
    RETURN_IF_ERROR(states_->WriteMaster(p.unit,
                                         piece.shard_offset - ctx_->unit(p.unit).shard_offset,
                                         values.data() + piece.param_offset, piece.count));
  }
  if (char* whole = gatherer_->Whole(p.unit); whole != nullptr) {
    RETURN_IF_ERROR(stream->Copy(whole + (p.offset - ctx_->unit(p.unit).offset) * esize, narrow,
                                 values.size() * esize));
  }
  if (ctx_->master_apart && stage == 0) {
    RETURN_IF_ERROR(stream->Copy(states_->master_data() + p.offset, values.data(),
                                 values.size_bytes()));
  }
  for (const Piece& piece : layout.PiecesOf(id)) {
    if (!owned(piece) || stage != 3) continue;
    RETURN_IF_ERROR(stream->Copy(states_->params_at(piece.shard_offset),
                                 narrow + piece.param_offset * esize, piece.count * esize));
  }
  return absl::OkStatus();
}

absl::Status Engine::OwnedStateSettled(std::string_view what) const {
  return host_ != nullptr ? host_->Settled(what) : absl::OkStatus();
}

absl::Status Engine::ZeroGrad() {
  RETURN_IF_ERROR(NotRestoring("ZeroGrad"));
  RETURN_IF_ERROR(OwnedStateSettled("ZeroGrad"));
  reducer_->Clear();
  return absl::OkStatus();
}

double Engine::loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }

EngineStats Engine::stats() const {
  const StatisticsAdaptor* host_memory = states_->host_memory();
  const ResourceStatistics host =
      host_memory != nullptr ? host_memory->statistics() : ResourceStatistics{};
  const StateFile* file = states_->state_file();
  // Clipping alone never brought the norm to the host: read it now.
  double last_grad_norm = last_grad_norm_;
  if (norm_on_device_) {
    // The caller's wait, not the step's: left out of the step's figures.
    const StreamOps before = ops_.Now();
    last_grad_norm = norm_->Read().value_or(last_grad_norm_);
    ops_.Exclude(ops_.Now() - before);
  }
  return EngineStats{.steps = steps_,
                     .skipped_steps = skipped_steps_,
                     .loss_scale = loss_scale(),
                     .last_grad_norm = last_grad_norm,
                     .micro_batches = reducer_->micro_batches(),
                     .pool = device_pool_->stats(),
                     .host_bytes = static_cast<size_t>(host.bytes.current),
                     .peak_host_bytes = static_cast<size_t>(host.bytes.peak),
                     .early_unit_updates = host_ != nullptr ? host_->early_updates() : 0,
                     .nvme_bytes = file != nullptr ? file->stats().state_bytes : 0,
                     .nvme_bytes_read = file != nullptr ? file->stats().bytes_read : 0,
                     .nvme_bytes_written = file != nullptr ? file->stats().bytes_written : 0,
                     .owned_state_wait_seconds = guard_.wait_seconds(),
                     .comm = ctx_->whole->stats(),
                     .stream_ops = ops_.last_step()};
}

}  // namespace zero
