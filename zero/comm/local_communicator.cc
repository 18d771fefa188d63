#include "zero/comm/local_communicator.h"

#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/comm/call_history.h"
#include "zero/comm/host_reduce.h"
#include "zero/comm/local_rendezvous.h"

namespace zero {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(int rank, int world_size, bool has_bytes,
                    std::shared_ptr<LocalRendezvous> rendezvous)
      : rank_(rank),
        world_size_(world_size),
        has_bytes_(has_bytes),
        rendezvous_(std::move(rendezvous)) {}
  // A rank that leaves can never take part again: fail its peers now rather
  // than at their timeout. Harmless after the last collective.
  ~LocalCommunicator() override {
    rendezvous_->Abort(absl::FailedPreconditionError(
        absl::StrFormat("rank %d left the group (its communicator was destroyed)", rank_)));
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  void Abort(const absl::Status& reason) override { rendezvous_->Abort(reason); }

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  struct Moved {
    uint64_t copied = 0;   // bytes memcpy'd
    uint64_t reduced = 0;  // bytes written by reductions
  };
  Moved Move(const CollectiveCall& call, absl::Span<const Arrival> peers) const;
  void ReduceChunk(const CollectiveCall& call, absl::Span<const Arrival> peers, size_t begin,
                   size_t count, void* dst) const;

  const int rank_;
  const int world_size_;
  const bool has_bytes_;
  const std::shared_ptr<LocalRendezvous> rendezvous_;
  CallHistory history_;
};

absl::Status LocalCommunicator::Execute(const CollectiveCall& call, const void* send, void* recv,
                                        Stream* stream, const absl::Status& invalid) {
  const uint64_t seq = history_.Record(call, invalid.ok());
  // A failure here still goes to the rendezvous, which fails the peers too.
  absl::Status ready = invalid;
  if (ready.ok() && stream != nullptr) ready = stream->Synchronize();
  ASSIGN_OR_RETURN(absl::Span<const Arrival> peers,
                   rendezvous_->Arrive(rank_, seq, {call, send, recv}, ready));
  if (has_bytes_ && call.count > 0) {
    const Moved moved = Move(call, peers);
    CountBackendBytes(moved.copied, moved.reduced);
  }
  rendezvous_->Depart(rank_, seq);
  return absl::OkStatus();
}

const char* At(const void* base, size_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * SizeOf(dtype);
}
char* At(void* base, size_t elements, DType dtype) {
  return static_cast<char*>(base) + elements * SizeOf(dtype);
}

// Reduces elements [begin, begin+count) of every rank's send, in rank order.
void LocalCommunicator::ReduceChunk(const CollectiveCall& call, absl::Span<const Arrival> peers,
                                    size_t begin, size_t count, void* dst) const {
  absl::InlinedVector<const void*, 16> sources;
  for (const Arrival& peer : peers) sources.push_back(At(peer.send, begin, call.dtype));
  HostReduce(call.dtype, call.op, sources, dst, count);
}

// Only this rank's share of the work; see the header for who writes what.
// No two ranks write the same bytes, and nobody writes bytes a peer still
// reads (in place included), so the exit barrier is the only sync needed.
LocalCommunicator::Moved LocalCommunicator::Move(const CollectiveCall& call,
                                                 absl::Span<const Arrival> peers) const {
  const Arrival& me = peers[rank_];
  const size_t bytes = call.count * SizeOf(call.dtype);
  Moved moved;
  auto copy = [&moved](void* dst, const void* src, size_t n) {
    if (dst == src) return;
    std::memcpy(dst, src, n);
    moved.copied += n;
  };
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      for (int p = 0; p < world_size_; ++p) {
        copy(At(me.recv, p * call.count, call.dtype), peers[p].send, bytes);
      }
      break;
    case CollectiveKind::kReduceScatter:
      ReduceChunk(call, peers, rank_ * call.count, call.count, me.recv);
      moved.reduced = bytes;
      break;
    case CollectiveKind::kAllReduce: {
      const Chunk chunk = ChunkOf(call.count, world_size_, rank_);
      if (chunk.size == 0) break;
      char* mine = At(me.recv, chunk.begin, call.dtype);
      ReduceChunk(call, peers, chunk.begin, chunk.size, mine);
      const size_t chunk_bytes = chunk.size * SizeOf(call.dtype);
      moved.reduced = chunk_bytes;
      for (int p = 0; p < world_size_; ++p) {
        if (p != rank_) copy(At(peers[p].recv, chunk.begin, call.dtype), mine, chunk_bytes);
      }
      break;
    }
    case CollectiveKind::kBroadcast: copy(me.recv, peers[call.root].send, bytes); break;
    case CollectiveKind::kBarrier: break;
  }
  return moved;
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
  auto rendezvous = std::make_shared<LocalRendezvous>(world_size, options.timeout);
  std::vector<std::unique_ptr<Communicator>> group;
  group.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    group.push_back(
        std::make_unique<LocalCommunicator>(r, world_size, options.has_bytes, rendezvous));
  }
  return group;
}

}  // namespace zero
