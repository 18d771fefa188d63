// Moving a rank's owned model states between the engine and host memory,
// and the checks that make that safe. Internal to save.cc and load.cc.
#pragma once

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/agreement.h"

namespace zero::checkpoint {

// Local checks every rank reaches alike: a device with bytes, the engine's
// world size times its replicas equal to the communicator's, and the
// optimizer's state count equal to what owned_state() returns.
absl::Status CheckParticipant(const Participant& rank);

// The checkpoint's ranks: the engine's shard group. Under hybrid sharding
// (Engine::replicas() > 1) every replica group holds the same shards, so a
// checkpoint is one group's: G files named by the rank inside the group,
// written by the first group (ranks [0, G): ranks are numbered group by
// group, zero/comm/topology.h) and read by every group. Otherwise G is the
// world and the file rank the rank.
int FileWorld(const Participant& rank);
int FileRank(const Participant& rank);
bool WritesFile(const Participant& rank);

// The bookkeeping collectives on the engine's stream and device pool.
Agreement AgreementFor(const Participant& rank);

// Buffers per element: master weights, then each optimizer state.
int BufferCount(const Participant& rank);

// Enqueue on engine.stream() a copy of buffer `buffer` (0: masters, 1 + i:
// state i) of unit `unit`'s owned piece, elements [at, at + count) of the
// piece, into `host` (kept until the stream has run the copy). With the
// state on NVMe it is done on return; chunks a copy before left in staging
// are not read again (offload/state_file.h), so copying a piece buffer by
// buffer reads the file once.
absl::Status EnqueueCopyToHost(Engine& engine, int unit, int buffer, size_t at, float* host,
                               size_t count);

// Elements [at, at + count) of buffer `buffer` of a unit's owned piece,
// from `values` (kept until the stream has run the copy), or zeros when null.
struct PieceWrite {
  int buffer;
  size_t at, count;
  const float* values;
};
// All of `writes` into unit `unit`'s owned piece, enqueued on
// engine.stream(); with the state on NVMe one pass over the elements they
// span, every buffer at once (the elements between them kept), done on return.
absl::Status WritePiece(Engine& engine, int unit, std::span<const PieceWrite> writes);

}  // namespace zero::checkpoint
