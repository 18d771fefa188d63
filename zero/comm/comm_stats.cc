#include "zero/comm/comm_stats.h"

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
    case CollectiveKind::kReduceScatter: return {peers * call.count, peers * call.count};
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

void CommStats::Add(const CollectiveCall& call, int rank, int world_size) {
  by_kind[static_cast<int>(call.kind)] += RingTraffic(call, rank, world_size);
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
  if (copied_bytes != 0 || reduced_bytes != 0) {
    absl::StrAppendFormat(&text, "backend copied=%d B reduced=%d B\n", copied_bytes,
                          reduced_bytes);
  }
  return text;
}

}  // namespace zero
