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
  if (layout.world_size() * rank.engine.replicas() != rank.comm.world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the engine is laid out for %d ranks x %d replicas, the communicator has %d",
        layout.world_size(), rank.engine.replicas(), rank.comm.world_size()));
  }
  if (layout.units().empty()) return absl::OkStatus();
  const size_t states = rank.engine.owned_state().pieces(0).state.size();
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

int FileWorld(const Participant& rank) { return rank.engine.layout().world_size(); }
int FileRank(const Participant& rank) { return rank.comm.rank() % FileWorld(rank); }
bool WritesFile(const Participant& rank) { return rank.comm.rank() < FileWorld(rank); }

namespace {

std::vector<float*> UnitBuffers(Engine& engine, int unit) {
  OwnedStateAccess::Pieces owned = engine.owned_state().pieces(unit);
  std::vector<float*> buffers = {owned.master};
  buffers.insert(buffers.end(), owned.state.begin(), owned.state.end());
  return buffers;
}

// State on NVMe (offload_device nvme) has no address: the piece is streamed
// through the engine's staging, chunk by chunk, at once on this thread (so
// host memory is done with on return, which the stream contract allows).
// The stream is drained first: the state file is written only by Step.
bool OnNvme(const Engine& engine) { return !engine.owned_state().nvme_file().empty(); }

absl::Status StreamNvme(Engine& engine, int unit, size_t at, size_t count,
                        OwnedStateAccess::Access access, StateFile::ChunkFn fn) {
  RETURN_IF_ERROR(engine.stream()->Synchronize());
  return engine.owned_state().Stream(unit, at, count, access, fn);
}

}  // namespace

absl::Status EnqueueCopyToHost(Engine& engine, int unit, int buffer, size_t at, float* host,
                               size_t count) {
  if (!OnNvme(engine)) {
    return engine.stream()->Copy(host, UnitBuffers(engine, unit)[buffer] + at,
                                 count * sizeof(float));
  }
  return StreamNvme(engine, unit, at, count, OwnedStateAccess::Access::kRead,
                    [&](size_t offset, size_t n, std::span<float* const> planes) {
                      std::copy_n(planes[buffer], n, host + (offset - at));
                      return absl::OkStatus();
                    });
}

absl::Status WritePiece(Engine& engine, int unit, std::span<const PieceWrite> writes) {
  if (writes.empty()) return absl::OkStatus();
  if (!OnNvme(engine)) {
    const std::vector<float*> buffers = UnitBuffers(engine, unit);
    for (const PieceWrite& w : writes) {
      float* to = buffers[w.buffer] + w.at;
      const size_t bytes = w.count * sizeof(float);
      RETURN_IF_ERROR(w.values != nullptr ? engine.stream()->Copy(to, w.values, bytes)
                                          : engine.stream()->Fill(to, 0, bytes));
    }
    return absl::OkStatus();
  }
  // By element, so each chunk of the pass looks at the writes that reach it.
  std::vector<PieceWrite> sorted(writes.begin(), writes.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const PieceWrite& a, const PieceWrite& b) { return a.at < b.at; });
  size_t hi = 0;
  for (const PieceWrite& w : sorted) hi = std::max(hi, w.at + w.count);
  const size_t lo = sorted[0].at;
  size_t done = 0;  // writes before it end before the chunks still to come
  // kUpdate: the elements between the writes, and the planes they skip, stay.
  return StreamNvme(
      engine, unit, lo, hi - lo, OwnedStateAccess::Access::kUpdate,
      [&](size_t offset, size_t n, std::span<float* const> planes) {
        while (done < sorted.size() && sorted[done].at + sorted[done].count <= offset) ++done;
        for (size_t i = done; i < sorted.size() && sorted[i].at < offset + n; ++i) {
          const PieceWrite& w = sorted[i];
          const size_t from = std::max(offset, w.at), to = std::min(offset + n, w.at + w.count);
          if (from >= to) continue;
          float* plane = planes[w.buffer] + (from - offset);
          if (w.values == nullptr) {
            std::fill_n(plane, to - from, 0.0f);
          } else {
            std::copy_n(w.values + (from - w.at), to - from, plane);
          }
        }
        return absl::OkStatus();
      });
}

}  // namespace zero::checkpoint
