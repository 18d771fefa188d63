#include "zero/checkpoint/internal/owned_state_io.h"

#include <algorithm>
#include <span>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero::checkpoint {

absl::Status CheckParticipant(const Participant& rank) {
  if (!rank.devices.backend().has_bytes()) {
    return absl::FailedPreconditionError(
        "checkpoints need devices that hold bytes; these are meta devices");
  }
  const Layout& layout = rank.engine.layout();
  if (layout.world_size() != rank.comm.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the engine is laid out for %d ranks, the communicator has %d",
                        layout.world_size(), rank.comm.world_size()));
  }
  if (layout.units().empty()) return absl::OkStatus();
  const size_t states = rank.engine.owned_state(0).state.size();
  if (states != static_cast<size_t>(rank.optimizer.state_buffers())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "optimizer '%s' has %d state buffers, the engine holds %d: not the engine's optimizer",
        rank.optimizer.name(), rank.optimizer.state_buffers(), states));
  }
  return absl::OkStatus();
}

Agreement AgreementFor(const Participant& rank) {
  Stream* stream = rank.engine.stream();
  return Agreement(rank.comm, rank.devices.pool(stream->device()), stream);
}

int BufferCount(const Participant& rank) { return 1 + rank.optimizer.state_buffers(); }

namespace {

std::vector<float*> UnitBuffers(Engine& engine, int unit) {
  Engine::OwnedState owned = engine.owned_state(unit);
  std::vector<float*> buffers = {owned.master};
  buffers.insert(buffers.end(), owned.state.begin(), owned.state.end());
  return buffers;
}

// State on NVMe (offload_device nvme) has no address: the piece is streamed
// through the engine's staging, chunk by chunk, at once on this thread (so
// `host` is done with on return, which the stream contract allows). The
// stream is drained first: the state file is written only by Step.
bool OnNvme(const Engine& engine) { return !engine.nvme_file().empty(); }

// `each(plane chunk, host chunk, n)` over elements [at, at + count) of
// buffer `buffer`; kUpdate keeps the planes it does not write.
template <typename Each>
absl::Status StreamNvme(Engine& engine, int unit, int buffer, size_t at, size_t count,
                        Engine::StateAccess access, Each each) {
  RETURN_IF_ERROR(engine.stream()->Synchronize());
  return engine.StreamOwnedState(
      unit, at, count, access,
      [&](size_t offset, size_t n, std::span<float* const> planes) -> absl::Status {
        each(planes[buffer], offset - at, n);
        return absl::OkStatus();
      });
}

}  // namespace

absl::Status EnqueueCopyToHost(Engine& engine, int unit, int buffer, size_t at, float* host,
                               size_t count) {
  if (OnNvme(engine)) {
    return StreamNvme(engine, unit, buffer, at, count, Engine::StateAccess::kRead,
                      [host](float* plane, size_t to, size_t n) {
                        std::copy_n(plane, n, host + to);
                      });
  }
  return engine.stream()->Copy(host, UnitBuffers(engine, unit)[buffer] + at, count * sizeof(float));
}

absl::Status EnqueueCopyFromHost(Engine& engine, int unit, int buffer, size_t at, const float* host,
                                 size_t count) {
  if (OnNvme(engine)) {
    return StreamNvme(engine, unit, buffer, at, count, Engine::StateAccess::kUpdate,
                      [host](float* plane, size_t from, size_t n) {
                        std::copy_n(host + from, n, plane);
                      });
  }
  return engine.stream()->Copy(UnitBuffers(engine, unit)[buffer] + at, host, count * sizeof(float));
}

absl::Status EnqueueZeros(Engine& engine, int unit, int buffer, size_t at, size_t count) {
  if (OnNvme(engine)) {
    return StreamNvme(engine, unit, buffer, at, count, Engine::StateAccess::kUpdate,
                      [](float* plane, size_t, size_t n) { std::fill_n(plane, n, 0.0f); });
  }
  return engine.stream()->Fill(UnitBuffers(engine, unit)[buffer] + at, 0, count * sizeof(float));
}

}  // namespace zero::checkpoint
