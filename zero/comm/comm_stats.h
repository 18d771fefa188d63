// Traffic accounting for collectives: what each rank sends and receives.
//
// The model is a bandwidth-optimal ring, counted per rank, whatever the
// backend really does (the local backend copies through shared memory):
//   all-gather, reduce-scatter: send and receive (N-1) * count elements;
//   all-reduce: a reduce-scatter then an all-gather of count elements split
//     into N balanced chunks, so 2 * (count - own chunk), i.e. 2(N-1)/N * count
//     (summed over ranks exactly 2(N-1) * count);
//   broadcast: the root sends count, every other rank receives count;
//   barrier: no elements;
//   all-to-all: (N-1) * count each way, sent directly to each peer (not a
//     ring: its levels count the chunks for other nodes as across).
// With one rank nothing moves. This is what the ZeRO paper counts: 2Ψ per
// step for stages 0-2 (all-reduce, or reduce-scatter + all-gather), 3Ψ for
// stage 3 (one more all-gather of the parameters).
//
// Each rank's bytes are also split by the level of the link they cross
// (topology.h): in the ring, in rank order, a rank sends to its successor
// (rank + 1 mod N) and receives from its predecessor, and a link between two
// nodes is `across`, any other `inside`. So in a flat ring over several
// nodes the last rank of each node carries all of its traffic across, and
// the others none; a hierarchical communicator's levels are those of its
// two steps (hierarchical_communicator.h).
//
// Beside the model, CommStats keeps what the backend itself moved where it
// knows: the local backend counts the bytes it memcpy's and the bytes its
// reductions write (see local_communicator.h for who does what).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "zero/comm/collective.h"
#include "zero/comm/topology.h"

namespace zero {

struct OpStats {
  uint64_t calls = 0;
  uint64_t elements_sent = 0;
  uint64_t elements_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;

  OpStats& operator+=(const OpStats& other);
  bool operator==(const OpStats&) const = default;
};

// What one call moves for `rank` under the ring model above (calls = 1).
OpStats RingTraffic(const CollectiveCall& call, int rank, int world_size);

// Bytes of one rank on one level of the topology.
struct LevelBytes {
  uint64_t sent = 0;
  uint64_t received = 0;

  LevelBytes& operator+=(const LevelBytes& other);
  bool operator==(const LevelBytes&) const = default;
};

// Per rank, per kind of collective; only calls that succeeded count.
struct CommStats {
  std::array<OpStats, kNumCollectiveKinds> by_kind{};
  // This rank's own work in the local backend (0 on others): bytes copied
  // from one buffer to another (a copy onto itself, in place, is not one),
  // and bytes written by reductions, each element read from every rank.
  uint64_t copied_bytes = 0;
  uint64_t reduced_bytes = 0;
  // The ring model's bytes by the level of the link (see above).
  LevelBytes inside;
  LevelBytes across;

  const OpStats& operator[](CollectiveKind kind) const { return by_kind[static_cast<int>(kind)]; }
  OpStats Total() const;
  void Add(const CollectiveCall& call, int rank, const Topology& topology);
  // Another rank's or step's counts added to these.
  CommStats& operator+=(const CommStats& other);
  // One line per kind that was called: "AllGather calls=3 sent=... recv=...".
  std::string ToString() const;
};

}  // namespace zero
