#include "zero/comm/node_communicator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "memory/tag.h"
#include "zero/comm/internal/comm_errors.h"
#include "zero/comm/internal/host_reduce.h"
#include "zero/comm/internal/node_flags.h"

namespace zero {
namespace {

using Phase = NodeFlags::Phase;

// Where the buffers peers must read go when they lie outside this
// process's slice: a copy in `memory`, which the caller allocates.
struct Staging {
  bool send = false;
  bool recv = false;
  size_t send_bytes = 0;
  size_t recv_bytes = 0;
  char* memory = nullptr;
  size_t bytes() const { return (send ? send_bytes : 0) + (recv ? recv_bytes : 0); }
};

// One call, by value: it may run on a stream after its communicator is gone.
struct Part {
  CollectiveCall call;
  const void* send;
  void* recv;
  uint64_t seq;
  Staging staging;  // planned once, when the call is made
};

char* At(uint64_t base, size_t elements, DType dtype) {
  return reinterpret_cast<char*>(base) + elements * SizeOf(dtype);
}

bool PeersReadSend(const CollectiveCall& call, int rank) {
  switch (call.kind) {
    case CollectiveKind::kBarrier: return false;
    case CollectiveKind::kBroadcast: return call.root == rank;
    default: return true;
  }
}


// What a communicator and its queued calls share.
class NodeState {
 public:
  NodeState(std::shared_ptr<NodeRange> range, absl::Duration timeout)
      : flags(std::move(range), timeout), timeout_(timeout) {}

  bool Own(const void* p) const {
    auto place = flags.range().Locate(p);
    return place.has_value() && place->local_rank == flags.rank();
  }

  Staging Plan(const CollectiveCall& call, const void* send, const void* recv) const {
    Staging staging;
    if (call.count == 0) return staging;
    staging.send = PeersReadSend(call, flags.rank()) && !Own(send);
    staging.recv = call.kind == CollectiveKind::kAllReduce && !Own(recv);
    staging.send_bytes = SendElements(call, flags.world()) * SizeOf(call.dtype);
    staging.recv_bytes = RecvElements(call, flags.world()) * SizeOf(call.dtype);
    return staging;
  }

  // This process's part of one call; a failure fails the group (the peers
  // may be waiting on this process).
  absl::Status Run(const Part& part) {
    absl::Status status = AwaitTurn(part);
    if (status.ok()) status = RunPart(part);
    if (!status.ok()) flags.Fail(RankFailedError(part.seq, flags.rank(), status));
    MutexLock lock(turn_mu_);
    finished_ = part.seq;
    turn_cv_.notify_all();
    return status;
  }

  NodeFlags flags;
  std::atomic<uint64_t> copied{0};
  std::atomic<uint64_t> reduced{0};

 private:
  // Calls run one at a time, in the order they were made, though they may
  // sit on different streams or the calling thread: each uses this
  // process's one slot. Bounded by the timeout like any wait.
  absl::Status AwaitTurn(const Part& part) {
    MutexLock lock(turn_mu_);
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoSeconds(timeout_) +
                          std::chrono::seconds(1);
    const bool turn = lock.AwaitUntil(turn_cv_, deadline, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                                              turn_mu_) {
      return finished_ + 1 >= part.seq;
    });
    if (turn) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrFormat(
        "node collective #%d %s on local rank %d: this process's call #%d (on another "
        "stream) did not finish within %s",
        part.seq, part.call.ToString(), flags.rank(), finished_ + 1,
        absl::FormatDuration(timeout_)));
  }

  absl::Status RunPart(const Part& part);
  absl::Status Move(const Part& part, uint64_t recv_published);
  absl::Status AllReduce(const Part& part, uint64_t recv_published);
  void Copy(void* dst, const void* src, size_t bytes) {
    if (dst == src || bytes == 0) return;
    std::memcpy(dst, src, bytes);
    copied.fetch_add(bytes, std::memory_order_relaxed);
  }
  void Reduce(const CollectiveCall& call, size_t begin, size_t count, void* dst) {
    absl::InlinedVector<const void*, 16> sources;
    for (int l = 0; l < flags.world(); ++l) {
      sources.push_back(At(Send(l), begin, call.dtype));
    }
    HostReduce(call.dtype, call.op, sources, dst, count);
    reduced.fetch_add(count * SizeOf(call.dtype), std::memory_order_relaxed);
  }
  uint64_t Send(int l) const { return l == flags.rank() ? flags.own().send : flags.peer(l).send; }
  uint64_t Recv(int l) const { return l == flags.rank() ? flags.own().recv : flags.peer(l).recv; }

  const absl::Duration timeout_;
  Mutex turn_mu_;
  std::condition_variable turn_cv_;
  uint64_t finished_ ABSL_GUARDED_BY(turn_mu_) = 0;  // the last call this process ran
};

absl::Status NodeState::RunPart(const Part& part) {
  RETURN_IF_ERROR(flags.failure());
  const CollectiveCall& call = part.call;
  uint64_t send = reinterpret_cast<uint64_t>(part.send);
  uint64_t recv = reinterpret_cast<uint64_t>(part.recv);
  // What peers read must be in this process's slice.
  const Staging& plan = part.staging;
  if (plan.send) {
    std::memcpy(plan.memory, part.send, plan.send_bytes);
    send = reinterpret_cast<uint64_t>(plan.memory);
  }
  if (plan.recv) {
    recv = reinterpret_cast<uint64_t>(plan.memory + (plan.send ? plan.send_bytes : 0));
  }
  NodeSlot& own = flags.own();
  own.call = call;
  own.send = send;
  own.recv = recv;
  flags.Post(Phase::kArrived, part.seq);
  RETURN_IF_ERROR(flags.WaitAll(Phase::kArrived, part.seq, call));
  RETURN_IF_ERROR(flags.CheckCalls(part.seq));
  if (call.count > 0 && call.kind != CollectiveKind::kBarrier) {
    for (int l = 0; l < flags.world(); ++l) RETURN_IF_ERROR(flags.range().SyncView(l));
    RETURN_IF_ERROR(Move(part, recv));
  }
  flags.Post(Phase::kDeparted, part.seq);
  return flags.WaitAll(Phase::kDeparted, part.seq, call);
}

// This process's share, reading peers in place (see the header for who
// writes what). Only this process's recv is written.
absl::Status NodeState::Move(const Part& part, uint64_t recv_published) {
  const CollectiveCall& call = part.call;
  const int rank = flags.rank();
  const size_t bytes = call.count * SizeOf(call.dtype);
  char* recv = static_cast<char*>(part.recv);
  switch (call.kind) {
    case CollectiveKind::kAllGather:
      for (int l = 0; l < flags.world(); ++l) {
        Copy(recv + l * bytes, l == rank ? part.send : At(Send(l), 0, call.dtype), bytes);
      }
      return absl::OkStatus();
    case CollectiveKind::kReduceScatter:
      Reduce(call, rank * call.count, call.count, recv);
      return absl::OkStatus();
    case CollectiveKind::kAllReduce: return AllReduce(part, recv_published);
    case CollectiveKind::kBroadcast:
      Copy(recv, call.root == rank ? part.send : At(Send(call.root), 0, call.dtype), bytes);
      return absl::OkStatus();
    case CollectiveKind::kAllToAll:
      for (int l = 0; l < flags.world(); ++l) {
        Copy(recv + l * bytes, At(Send(l), rank * call.count, call.dtype), bytes);
      }
      return absl::OkStatus();
    case CollectiveKind::kBarrier: return absl::OkStatus();
  }
  return absl::InternalError(absl::StrFormat("unknown collective %s", call.ToString()));
}

// Sum this process's 1/N into its published recv, wait for the peers'
// sums, copy them.
absl::Status NodeState::AllReduce(const Part& part, uint64_t recv_published) {
  const CollectiveCall& call = part.call;
  const int rank = flags.rank();
  const Chunk mine = ChunkOf(call.count, flags.world(), rank);
  if (mine.size > 0) Reduce(call, mine.begin, mine.size, At(recv_published, mine.begin, call.dtype));
  flags.Post(Phase::kReduced, part.seq);
  RETURN_IF_ERROR(flags.WaitAll(Phase::kReduced, part.seq, call));
  char* recv = static_cast<char*>(part.recv);
  const size_t unit = SizeOf(call.dtype);
  for (int l = 0; l < flags.world(); ++l) {
    const Chunk chunk = ChunkOf(call.count, flags.world(), l);
    const uint64_t from = l == rank ? recv_published : Recv(l);
    Copy(recv + chunk.begin * unit, At(from, chunk.begin, call.dtype), chunk.size * unit);
  }
  return absl::OkStatus();
}

class NodeCommunicator final : public Communicator {
 public:
  NodeCommunicator(std::shared_ptr<NodeState> state, MemoryResource* pool)
      : state_(std::move(state)), pool_(pool) {}
  // Peers' later calls fail at once instead of at their timeout; calls
  // already queued still run.
  ~NodeCommunicator() override { state_->flags.Leave(seq_); }

  int rank() const override { return state_->flags.rank(); }
  int world_size() const override { return state_->flags.world(); }
  void Abort(const absl::Status& reason) override { state_->flags.Fail(reason); }
  absl::Status AsyncError() const override { return state_->flags.failure(); }
  CommStats stats() const override {
    CommStats stats = Communicator::stats();
    stats.copied_bytes += state_->copied.load(std::memory_order_relaxed);
    stats.reduced_bytes += state_->reduced.load(std::memory_order_relaxed);
    return stats;
  }

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override {
    Part part{call, send, recv, ++seq_, {}};
    absl::Status bad = invalid;
    if (bad.ok()) bad = CheckRecv(call, recv);
    if (bad.ok() && stream != nullptr && stream->is_card()) {
      bad = absl::UnimplementedError(absl::StrFormat(
          "%s on local rank %d: node collectives run on host streams only (a card's stream "
          "would block a host callback on its peers)",
          call.ToString(), rank()));
    }
    if (!bad.ok()) {  // the peers would wait for a call that never comes
      state_->flags.Fail(RankFailedError(part.seq, rank(), bad));
      return bad;
    }
    RETURN_IF_ERROR(state_->flags.failure());  // a failed group fails fast
    // Staging comes from the pool here, on the call's stream, and goes back
    // in that stream's order: work on a stream must not call the pool.
    part.staging = state_->Plan(call, send, recv);
    const size_t staging_bytes = part.staging.bytes();
    if (staging_bytes > 0) {
      absl::StatusOr<char*> got = AllocateStaging(staging_bytes, stream);
      if (!got.ok()) {
        state_->flags.Fail(RankFailedError(part.seq, rank(), got.status()));
        return got.status();
      }
      part.staging.memory = *got;
    }
    absl::Status result;
    if (stream == nullptr) {
      result = state_->Run(part);
    } else {
      result = stream->Enqueue([state = state_, part] { (void)state->Run(part); });
      if (!result.ok()) state_->flags.Fail(RankFailedError(part.seq, rank(), result));
    }
    if (staging_bytes > 0) {
      pool_->Deallocate(part.staging.memory, staging_bytes, stream).IgnoreError();
    }
    return result;
  }

 private:
  absl::Status CheckRecv(const CollectiveCall& call, const void* recv) const {
    if (call.count == 0 || recv == nullptr) return absl::OkStatus();
    auto place = state_->flags.range().Locate(recv);
    if (!place.has_value() || place->local_rank == rank()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s on local rank %d: recv %p is in local rank %d's slice of the node range, which "
        "this process may only read",
        call.ToString(), rank(), recv, place->local_rank));
  }

  absl::StatusOr<char*> AllocateStaging(size_t bytes, Stream* stream) {
    ASSIGN_OR_RETURN(void* p, pool_->Allocate(bytes, Tag::kCommunication, stream));
    if (!state_->Own(p)) {
      pool_->Deallocate(p, bytes, stream).IgnoreError();
      return absl::InvalidArgumentError(absl::StrFormat(
          "local rank %d: the node communicator's pool is not this process's pool over the "
          "node range (its staging at %p is outside the slice)",
          rank(), p));
    }
    return static_cast<char*>(p);
  }

  const std::shared_ptr<NodeState> state_;
  MemoryResource* const pool_;
  uint64_t seq_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeNodeCommunicator(
    std::shared_ptr<NodeRange> range, MemoryResource* pool, NodeGroupOptions options) {
  if (range == nullptr || pool == nullptr) {
    return absl::InvalidArgumentError("a node communicator needs a node range and a pool");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the collective timeout must be positive");
  }
  auto state = std::make_shared<NodeState>(std::move(range), options.timeout);
  return std::unique_ptr<Communicator>(new NodeCommunicator(std::move(state), pool));
}

}  // namespace zero
