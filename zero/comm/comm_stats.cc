#include "zero/comm/comm_stats.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace zero {

OpStats& OpStats::operator+=(const OpStats& other) {
  calls += other.calls;
  elements_sent += other.elements_sent;
  elements_received += other.elements_received;
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  return *this;
}

LevelBytes& LevelBytes::operator+=(const LevelBytes& other) {
  sent += other.sent;
  received += other.received;
  return *this;
}

namespace {

struct Elements {
  uint64_t sent = 0;
  uint64_t received = 0;
};

Elements RingElements(const CollectiveCall& call, int rank, int world_size) {
  if (world_size <= 1) return {};
  const uint64_t peers = static_cast<uint64_t>(world_size - 1);
  switch (call.kind) {
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll: return {peers * call.count, peers * call.count};
    case CollectiveKind::kAllReduce: {
      const uint64_t moved = 2 * (call.count - ChunkOf(call.count, world_size, rank).size);
      return {moved, moved};
    }
    case CollectiveKind::kBroadcast:
      return rank == call.root ? Elements{call.count, 0} : Elements{0, call.count};
    case CollectiveKind::kBarrier: return {};
  }
  return {};
}

}  // namespace

OpStats RingTraffic(const CollectiveCall& call, int rank, int world_size) {
  const Elements e = RingElements(call, rank, world_size);
  const uint64_t size = SizeOf(call.dtype);
  return {.calls = 1,
          .elements_sent = e.sent,
          .elements_received = e.received,
          .bytes_sent = e.sent * size,
          .bytes_received = e.received * size};
}

OpStats CommStats::Total() const {
  OpStats total;
  for (const OpStats& s : by_kind) total += s;
  return total;
}

void CommStats::Add(const CollectiveCall& call, int rank, const Topology& topology) {
  const int n = topology.world_size();
  const OpStats traffic = RingTraffic(call, rank, n);
  by_kind[static_cast<int>(call.kind)] += traffic;
  if (call.kind == CollectiveKind::kAllToAll) {  // direct: a chunk to each peer
    const uint64_t chunk = traffic.bytes_sent / std::max(n - 1, 1);
    const uint64_t outside = n - topology.ranks_per_node();
    across.sent += outside * chunk;
    across.received += outside * chunk;
    inside.sent += traffic.bytes_sent - outside * chunk;
    inside.received += traffic.bytes_received - outside * chunk;
    return;
  }
  LevelBytes& to_successor = topology.same_node(rank, (rank + 1) % n) ? inside : across;
  LevelBytes& from_predecessor = topology.same_node(rank, (rank + n - 1) % n) ? inside : across;
  to_successor.sent += traffic.bytes_sent;
  from_predecessor.received += traffic.bytes_received;
}

CommStats& CommStats::operator+=(const CommStats& other) {
  for (int k = 0; k < kNumCollectiveKinds; ++k) by_kind[k] += other.by_kind[k];
  copied_bytes += other.copied_bytes;
  reduced_bytes += other.reduced_bytes;
  inside += other.inside;
  across += other.across;
  return *this;
}

std::string CommStats::ToString() const {
  std::string text;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const OpStats& s = by_kind[k];
    if (s.calls == 0) continue;
    absl::StrAppendFormat(&text,
                          "%s calls=%d sent=%d elements (%d B) received=%d elements (%d B)\n",
                          Name(static_cast<CollectiveKind>(k)), s.calls, s.elements_sent,
                          s.bytes_sent, s.elements_received, s.bytes_received);
  }
  if (across.sent != 0 || across.received != 0) {
    absl::StrAppendFormat(&text, "levels inside sent=%d B received=%d B, across sent=%d B "
                          "received=%d B\n", inside.sent, inside.received, across.sent,
                          across.received);
  }
  if (copied_bytes != 0 || reduced_bytes != 0) {
    absl::StrAppendFormat(&text, "backend copied=%d B reduced=%d B\n", copied_bytes,
                          reduced_bytes);
  }
  return text;
}

}  // namespace zero
