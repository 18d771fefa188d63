#include "zero/comm/internal/node_flags.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "zero/comm/internal/comm_errors.h"

namespace zero {
namespace {

static_assert(sizeof(NodeSlot) <= NodeRange::kMailboxBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<uint32_t>::is_always_lock_free);
// A futex is 32 bits: a wait watches a counter's low half, which is its
// first word on a little-endian machine and changes with every post.
static_assert(std::endian::native == std::endian::little);

// Not FUTEX_PRIVATE_FLAG: the waiter and the waker are different processes
// sharing the mapping (the waiter's is read-only, which FUTEX_WAIT allows).
const uint32_t* Word(const std::atomic<uint64_t>& counter) {
  return reinterpret_cast<const uint32_t*>(&counter);
}

void FutexWait(const std::atomic<uint64_t>& counter, uint64_t seen, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, Word(counter), FUTEX_WAIT, static_cast<uint32_t>(seen), &ts, nullptr, 0);
}

void FutexWake(const std::atomic<uint64_t>& counter) {
  syscall(SYS_futex, Word(counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

constexpr int kSpins = 128;  // pauses before sleeping: a peer often posts within microseconds
// A sleep's limit: how often a waiter looks at lives, failures and its
// deadline when no post wakes it.
constexpr absl::Duration kNap = absl::Milliseconds(1);

const std::atomic<uint64_t>& Counter(const NodeSlot& slot, NodeFlags::Phase phase) {
  switch (phase) {
    case NodeFlags::Phase::kArrived: return slot.arrived;
    case NodeFlags::Phase::kReduced: return slot.reduced;
    case NodeFlags::Phase::kDeparted: return slot.departed;
  }
  return slot.departed;
}

void Pause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

std::atomic<uint64_t>& Counter(NodeSlot& slot, NodeFlags::Phase phase) {
  return const_cast<std::atomic<uint64_t>&>(Counter(std::as_const(slot), phase));
}

}  // namespace

NodeFlags::NodeFlags(std::shared_ptr<NodeRange> range, absl::Duration timeout)
    : range_(std::move(range)), timeout_(timeout) {}

NodeSlot& NodeFlags::own() const { return *static_cast<NodeSlot*>(range_->own_mailbox()); }

const NodeSlot& NodeFlags::peer(int local) const {
  return *static_cast<const NodeSlot*>(range_->mailbox(local));
}

void NodeFlags::Post(Phase phase, uint64_t seq) {
  Counter(own(), phase).store(seq, std::memory_order_seq_cst);
  // Pairs with SleepOn: a peer either sees `seq` before it sleeps or is
  // seen asleep here (both sides seq_cst), so no post goes unnoticed.
  for (int l = 0; l < world(); ++l) {
    if (l != rank() && peer(l).sleeping.load(std::memory_order_seq_cst) != 0) {
      FutexWake(Counter(own(), phase));
      return;
    }
  }
}

void NodeFlags::SleepOn(const std::atomic<uint64_t>& counter, uint64_t seq) {
  own().sleeping.fetch_add(1, std::memory_order_seq_cst);
  const uint64_t seen = counter.load(std::memory_order_seq_cst);
  if (seen < seq) FutexWait(counter, seen, kNap);
  own().sleeping.fetch_sub(1, std::memory_order_seq_cst);
}

void NodeFlags::WakeAll() {
  for (Phase phase : {Phase::kArrived, Phase::kReduced, Phase::kDeparted}) {
    FutexWake(Counter(own(), phase));
  }
}

absl::Status NodeFlags::WaitAll(Phase phase, uint64_t seq, const CollectiveCall& call) {
  const absl::Time deadline = absl::Now() + timeout_;
  for (int l = 0; l < world(); ++l) {
    if (l == rank()) continue;
    if (absl::Status s = WaitOne(l, phase, seq, call, deadline); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NodeFlags::WaitOne(int local, Phase phase, uint64_t seq, const CollectiveCall& call,
                                absl::Time deadline) {
  const NodeSlot& slot = peer(local);
  const std::atomic<uint64_t>& counter = Counter(slot, phase);
  for (int spins = 0; counter.load(std::memory_order_acquire) < seq; ++spins) {
    if (slot.failed.load(std::memory_order_acquire) != 0) return PeerError(local, seq, call);
    const uint64_t left = slot.left.load(std::memory_order_acquire);
    if (left != 0 && left <= seq) return PeerError(local, seq, call);
    if (own().failed.load(std::memory_order_acquire) != 0) return failure();
    if (spins < kSpins) {
      Pause();
      continue;
    }
    SleepOn(counter, seq);
    if ((spins - kSpins) % 8 != 0) continue;  // lives and the clock every few naps
    if (absl::Status alive = range_->CheckAlive(local); !alive.ok()) {
      // What it posted before it exited still counts (its flags stay
      // readable): it may have finished this call, failed or left.
      if (counter.load(std::memory_order_acquire) >= seq) return absl::OkStatus();
      if (slot.failed.load(std::memory_order_acquire) != 0 ||
          slot.left.load(std::memory_order_acquire) != 0) {
        return PeerError(local, seq, call);
      }
      return absl::UnavailableError(absl::StrFormat("node collective #%d %s: %s", seq,
                                                    call.ToString(), alive.message()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "node collective #%d %s: local rank %d did not %s within %s (it is at collective #%d)",
          seq, call.ToString(), local,
          phase == Phase::kArrived ? "arrive" : "finish reading this rank's buffers",
          absl::FormatDuration(timeout_), slot.arrived.load(std::memory_order_acquire)));
    }
  }
  return absl::OkStatus();
}

absl::Status NodeFlags::PeerError(int local, uint64_t seq, const CollectiveCall& call) const {
  const NodeSlot& slot = peer(local);
  if (slot.failed.load(std::memory_order_acquire) != 0) {
    char reason[sizeof(slot.reason)];
    std::memcpy(reason, slot.reason, sizeof(reason));
    reason[sizeof(reason) - 1] = '\0';
    return absl::FailedPreconditionError(absl::StrFormat(
        "node collective #%d %s: local rank %d failed: %s", seq, call.ToString(), local, reason));
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("node collective #%d %s: local rank %d left the group after collective #%d",
                      seq, call.ToString(), local, slot.left.load() - 1));
}

absl::Status NodeFlags::CheckCalls(uint64_t seq) const {
  std::vector<std::optional<CollectiveCall>> calls(world());
  bool differ = false;
  for (int l = 0; l < world(); ++l) {
    calls[l] = l == rank() ? own().call : peer(l).call;
    differ |= !(*calls[l] == own().call);
  }
  return differ ? MismatchError(seq, calls) : absl::OkStatus();
}

void NodeFlags::Fail(const absl::Status& reason) {
  const absl::Status status = reason.ok() ? absl::CancelledError("aborted") : reason;
  {
    MutexLock lock(mu_);
    if (!first_.ok()) return;
    first_ = status;
  }
  NodeSlot& slot = own();
  slot.code = static_cast<int32_t>(status.code());
  const std::string text(status.message());
  const size_t n = std::min(text.size(), sizeof(slot.reason) - 1);
  std::memcpy(slot.reason, text.data(), n);
  slot.reason[n] = '\0';
  slot.failed.store(1, std::memory_order_release);
  WakeAll();  // the peers asleep on this process read the failure now
}

absl::Status NodeFlags::failure() const {
  MutexLock lock(mu_);
  return first_;
}

void NodeFlags::Leave(uint64_t last_seq) {
  own().left.store(last_seq + 1, std::memory_order_release);
  WakeAll();
}

}  // namespace zero
