#include "zero/comm/local_communicator.h"

#include <cstring>
#include <mutex>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "zero/comm/hierarchical_communicator.h"
#include "zero/comm/internal/call_history.h"
#include "zero/comm/internal/comm_errors.h"
#include "zero/comm/internal/host_reduce.h"
#include "zero/comm/internal/local_rendezvous.h"
#include "zero/comm/internal/stream_mover.h"

namespace zero {
namespace {

// One rank's part of one collective, by value: work queued on a stream may
// run after its communicator is gone.
struct Part {
  CollectiveCall call;
  const void* send = nullptr;
  void* recv = nullptr;
  int rank = 0;
  int world_size = 1;
  uint64_t seq = 0;
  // Set when the bytes move as work on this stream (StreamMover): a card's
  // buffers, or LocalGroupOptions::move_on_streams. Null: memcpy here.
  Stream* mover_stream = nullptr;
};

struct Moved {
  uint64_t copied = 0;   // bytes memcpy'd
  uint64_t reduced = 0;  // bytes written by reductions
};

const char* At(const void* base, size_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * SizeOf(dtype);
}
char* At(void* base, size_t elements, DType dtype) {
  return static_cast<char*>(base) + elements * SizeOf(dtype);
}

// The host path's hands: memcpy and HostReduce on the calling thread.
struct HostMover {
  absl::Status Copy(void* dst, const void* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Reduce(DType dtype, ReduceOp op, absl::Span<const void* const> sources, void* dst,
                      size_t count) {
    HostReduce(dtype, op, sources, dst, count);
    return absl::OkStatus();
  }
  absl::Status Finish() { return absl::OkStatus(); }
};

// Reduces elements [begin, begin+count) of every rank's send, in rank order.
template <typename Mover>
absl::Status ReduceChunk(const CollectiveCall& call, absl::Span<const Arrival> peers,
                         size_t begin, size_t count, void* dst, Mover& mover) {
  absl::InlinedVector<const void*, 16> sources;
  for (const Arrival& peer : peers) sources.push_back(At(peer.send, begin, call.dtype));
  return mover.Reduce(call.dtype, call.op, sources, dst, count);
}

// Only this rank's share of the work; see the header for who writes what.
// No two ranks write the same bytes, and nobody writes bytes a peer still
// reads (in place included), so the exit barrier is the only sync needed
// (once the mover is done: Finish).
template <typename Mover>
absl::Status MoveBytes(const Part& part, absl::Span<const Arrival> peers, Mover& mover,
                       Moved& moved) {
  const CollectiveCall& call = part.call;
  const Arrival& me = peers[part.rank];
  const size_t bytes = call.count * SizeOf(call.dtype);
  auto copy = [&moved, &mover](void* dst, const void* src, size_t n) -> absl::Status {
    if (dst == src) return absl::OkStatus();
    moved.copied += n;
    return mover.Copy(dst, src, n);
  };
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      for (int p = 0; p < part.world_size; ++p) {
        RETURN_IF_ERROR(copy(At(me.recv, p * call.count, call.dtype), peers[p].send, bytes));
      }
      break;
    case CollectiveKind::kReduceScatter:
      RETURN_IF_ERROR(
          ReduceChunk(call, peers, part.rank * call.count, call.count, me.recv, mover));
      moved.reduced = bytes;
      break;
    case CollectiveKind::kAllReduce: {
      const Chunk chunk = ChunkOf(call.count, part.world_size, part.rank);
      if (chunk.size == 0) break;
      char* mine = At(me.recv, chunk.begin, call.dtype);
      RETURN_IF_ERROR(ReduceChunk(call, peers, chunk.begin, chunk.size, mine, mover));
      const size_t chunk_bytes = chunk.size * SizeOf(call.dtype);
      moved.reduced = chunk_bytes;
      for (int p = 0; p < part.world_size; ++p) {
        if (p != part.rank) {
          RETURN_IF_ERROR(copy(At(peers[p].recv, chunk.begin, call.dtype), mine, chunk_bytes));
        }
      }
      break;
    }
    case CollectiveKind::kBroadcast:
      RETURN_IF_ERROR(copy(me.recv, peers[call.root].send, bytes));
      break;
    case CollectiveKind::kBarrier: break;
    case CollectiveKind::kAllToAll:
      for (int p = 0; p < part.world_size; ++p) {
        RETURN_IF_ERROR(copy(At(me.recv, p * call.count, call.dtype),
                             At(peers[p].send, part.rank * call.count, call.dtype), bytes));
      }
      break;
  }
  return absl::OkStatus();
}

// Finished on error too: the exit barrier lets the peers reuse their
// buffers, so this rank's stream must be done reading and writing them.
template <typename Mover>
absl::StatusOr<Moved> Move(const Part& part, absl::Span<const Arrival> peers, Mover& mover) {
  Moved moved;
  const absl::Status status = MoveBytes(part, peers, mover, moved);
  const absl::Status finished = mover.Finish();
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(finished);
  return moved;
}

SimulatedLink AcrossLink(const LocalGroupOptions& options) {
  if (options.across_link.has_value()) return *options.across_link;
  SimulatedLink across = options.link;
  across.bytes_per_second /= 8;  // 0 (unlimited) stays 0
  if (across.bytes_per_second != 0 && across.bytes_per_second < 1) across.bytes_per_second = 1;
  return across;
}

// What a group's ranks share; held by each communicator and by each piece of
// work they queue, so it outlives both.
struct SharedState {
  SharedState(const Topology& topology, const LocalGroupOptions& options)
      : rendezvous(topology.world_size(), options.timeout),
        topology(topology),
        has_bytes(options.has_bytes),
        link(topology.multi_node() ? AcrossLink(options) : options.link),
        devices(options.devices),
        move_on_streams(options.move_on_streams) {}

  // This rank's part of a call: meet the peers, take the link's time, move
  // the bytes, leave. `ready` not OK fails the group instead (see Arrive).
  absl::StatusOr<Moved> Run(const Part& part, const absl::Status& ready) {
    ASSIGN_OR_RETURN(
        absl::Span<const Arrival> peers,
        rendezvous.Arrive(part.rank, part.seq, {part.call, part.send, part.recv}, ready));
    if (!link.off()) absl::SleepFor(link.TimeOf(part.call, part.rank, part.world_size));
    absl::StatusOr<Moved> moved = Moved{};
    if (has_bytes && part.call.count > 0) {
      if (part.mover_stream != nullptr) {
        StreamMover mover(part.mover_stream, devices);
        moved = Move(part, peers, mover);
      } else {
        HostMover mover;
        moved = Move(part, peers, mover);
      }
    }
    // The peers may have read half of what this rank wrote: fail them too.
    if (!moved.ok()) rendezvous.Abort(RankFailedError(part.seq, part.rank, moved.status()));
    rendezvous.Depart(part.rank, part.seq);
    return moved;
  }

  LocalRendezvous rendezvous;
  const Topology topology;
  const bool has_bytes;
  const SimulatedLink link;
  DeviceSystem* const devices;
  const bool move_on_streams;
};

class LocalCommunicator;

// Where queued work reports the bytes it moved: null once the communicator
// is destroyed (the mutex makes the destructor wait for a report in flight).
struct StatsSink {
  std::mutex mu;
  LocalCommunicator* comm = nullptr;  // guarded by mu
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(int rank, int world_size, bool stream_ordered,
                    std::shared_ptr<SharedState> shared)
      : rank_(rank),
        world_size_(world_size),
        stream_ordered_(stream_ordered),
        shared_(std::move(shared)),
        sink_(std::make_shared<StatsSink>()) {
    sink_->comm = this;
  }
  // A rank that leaves can never take part again: a peer's call beyond this
  // rank's last fails at once rather than at its timeout; calls every rank
  // made (queued ones too, which still run) are unaffected, so a slower
  // peer finishing the last collective sees no error. Queued work no longer
  // reports here.
  ~LocalCommunicator() override {
    shared_->rendezvous.Leave(
        rank_, history_.seq(),
        absl::FailedPreconditionError(
            absl::StrFormat("rank %d left the group (its communicator was destroyed)", rank_)));
    std::lock_guard lock(sink_->mu);
    sink_->comm = nullptr;
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Topology topology() const override { return shared_->topology; }
  void Abort(const absl::Status& reason) override { shared_->rendezvous.Abort(reason); }
  absl::Status AsyncError() const override { return shared_->rendezvous.status(); }

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  absl::Status Enqueue(const Part& part, Stream& stream, absl::Status bad);

  const int rank_;
  const int world_size_;
  const bool stream_ordered_;
  const std::shared_ptr<SharedState> shared_;
  const std::shared_ptr<StatsSink> sink_;
  CallHistory history_;
};

absl::Status LocalCommunicator::Execute(const CollectiveCall& call, const void* send, void* recv,
                                        Stream* stream, const absl::Status& invalid) {
  Part part{call, send, recv, rank_, world_size_, history_.Record(call, invalid.ok())};
  if (stream_ordered_ && stream != nullptr) return Enqueue(part, *stream, invalid);
  // A failure here still goes to the rendezvous, which fails the peers too.
  absl::Status ready = invalid;
  if (stream != nullptr && (stream->is_card() || shared_->move_on_streams)) {
    part.mover_stream = stream;
    if (ready.ok() && shared_->devices == nullptr && shared_->has_bytes) {
      ready = absl::InvalidArgumentError(absl::StrFormat(
          "%s on rank %d: buffers on a card (or move_on_streams) need "
          "LocalGroupOptions::devices, where the sums get their scratch",
          call.ToString(), rank_));
    }
  }
  if (ready.ok() && stream != nullptr) ready = stream->Synchronize();
  ASSIGN_OR_RETURN(const Moved moved, shared_->Run(part, ready));
  CountBackendBytes(moved.copied, moved.reduced);
  return absl::OkStatus();
}

absl::Status LocalCommunicator::Enqueue(const Part& part, Stream& stream, absl::Status bad) {
  if (bad.ok() && stream.is_card()) {
    bad = absl::InvalidArgumentError(absl::StrFormat(
        "%s on rank %d: stream-ordered local collectives need a host or meta stream (on a "
        "card's stream a host callback would block waiting for the peers)",
        part.call.ToString(), rank_));
  }
  if (!bad.ok()) {  // the peers would wait for a call that never comes
    shared_->rendezvous.Abort(RankFailedError(part.seq, rank_, bad));
    return bad;
  }
  RETURN_IF_ERROR(shared_->rendezvous.status());  // a failed group fails fast
  shared_->rendezvous.Enqueued(rank_, part.seq);
  absl::Status queued = stream.Enqueue([shared = shared_, sink = sink_, part] {
    absl::StatusOr<Moved> moved = shared->Run(part, absl::OkStatus());
    if (!moved.ok()) return;  // the group is poisoned; AsyncError() reports it
    std::lock_guard lock(sink->mu);
    if (sink->comm != nullptr) sink->comm->CountBackendBytes(moved->copied, moved->reduced);
  });
  if (!queued.ok()) shared_->rendezvous.Abort(RankFailedError(part.seq, rank_, queued));
  return queued;
}

using Group = std::vector<std::unique_ptr<Communicator>>;

absl::StatusOr<Group> CreateFlat(const Topology& topology, const LocalGroupOptions& options) {
  auto shared = std::make_shared<SharedState>(topology, options);
  Group group;
  group.reserve(topology.world_size());
  for (int r = 0; r < topology.world_size(); ++r) {
    group.push_back(std::make_unique<LocalCommunicator>(r, topology.world_size(),
                                                        options.stream_ordered, shared));
  }
  return group;
}

// A group per node over `link`, a group per local rank over the link
// between nodes, and each rank's adaptor over its two.
absl::StatusOr<Group> CreateHierarchical(const Topology& topology,
                                         const LocalGroupOptions& options) {
  if (options.devices == nullptr || options.devices->device_count() < topology.world_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hierarchical local group of %d ranks on %d nodes: needs LocalGroupOptions::devices "
        "with a device per rank (each rank's scratch comes from its device's pool), or "
        "hierarchical = false",
        topology.world_size(), topology.nodes()));
  }
  LocalGroupOptions flat = options;
  flat.hierarchical = false;
  flat.ranks_per_node = 0;  // a node's group: one node
  std::vector<Group> nodes, columns;
  for (int n = 0; n < topology.nodes(); ++n) {
    ASSIGN_OR_RETURN(nodes.emplace_back(),
                     CreateFlat(Topology::OneNode(topology.ranks_per_node()), flat));
  }
  flat.link = AcrossLink(options);
  for (int l = 0; l < topology.ranks_per_node(); ++l) {
    ASSIGN_OR_RETURN(Topology across, Topology::Create(topology.nodes(), 1));
    ASSIGN_OR_RETURN(columns.emplace_back(), CreateFlat(across, flat));
  }
  const std::shared_ptr<HierarchyLatch> latch = MakeHierarchyLatch(topology.world_size());
  Group group;
  for (int r = 0; r < topology.world_size(); ++r) {
    const int n = topology.node_of(r), l = topology.local_rank(r);
    ASSIGN_OR_RETURN(group.emplace_back(),
                     MakeHierarchicalCommunicator(topology, r, std::move(nodes[n][l]),
                                                  std::move(columns[l][n]),
                                                  &options.devices->pool(r), latch));
  }
  return group;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> LocalGroup::Create(int world_size,
                                                                              Options options) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("world size %d < 1", world_size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the collective timeout must be positive");
  }
  RETURN_IF_ERROR(options.link.Validate());
  if (options.across_link.has_value()) RETURN_IF_ERROR(options.across_link->Validate());
  ASSIGN_OR_RETURN(const Topology topology,
                   Topology::Create(world_size, options.ranks_per_node == 0
                                                    ? world_size
                                                    : options.ranks_per_node));
  if (topology.multi_node() && options.hierarchical) return CreateHierarchical(topology, options);
  return CreateFlat(topology, options);
}

}  // namespace zero
