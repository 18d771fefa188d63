// The node communicator's flags: what each process posts in its mailbox
// (node_range.h) and how it waits for its peers' posts. A process writes
// only its own slot; every wait has a deadline and watches the peers'
// failure flags and lives, so no wait outlasts a dead or failed peer.
//
// A wait spins briefly, then sleeps on the peer's counter (a futex on the
// shared mapping) until the peer posts and wakes it. It never yields in a
// loop: with more processes than cores (CI, or 4 ranks on 2 cores) a
// yielding waiter takes the core from the very peer it waits for, and its
// context switches cost the training threads more than the wake-up does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "memory/node_range.h"
#include "zero/comm/collective.h"

namespace zero {

// One process's slot: the call it is in and its buffers (addresses in the
// range), then how far it got. Lives in shared memory: plain data and
// lock-free atomics only.
struct NodeSlot {
  std::atomic<uint64_t> arrived;  // call number whose arguments are posted
  CollectiveCall call;
  uint64_t send;
  uint64_t recv;
  std::atomic<uint64_t> reduced;   // call number whose own sum is written (all-reduce)
  std::atomic<uint64_t> departed;  // call number it no longer reads peers in
  std::atomic<uint64_t> left;      // nonzero: gone after call number left - 1
  std::atomic<uint32_t> failed;    // nonzero: the group failed here; code and text follow
  std::atomic<uint32_t> sleeping;  // this process's threads asleep on a peer's counter
  int32_t code;
  char reason[1024];
};

class NodeFlags {
 public:
  enum class Phase { kArrived, kReduced, kDeparted };

  NodeFlags(std::shared_ptr<NodeRange> range, absl::Duration timeout);

  NodeRange& range() const { return *range_; }
  int rank() const { return range_->local_rank(); }
  int world() const { return range_->local_world(); }
  NodeSlot& own() const;
  const NodeSlot& peer(int local) const;

  // Sets this process's `phase` to `seq` and wakes the peers asleep on it.
  void Post(Phase phase, uint64_t seq);
  // Until every peer's `phase` is at least `seq` (call `call`).
  absl::Status WaitAll(Phase phase, uint64_t seq, const CollectiveCall& call);
  // FailedPrecondition naming the call and each rank's when they differ.
  absl::Status CheckCalls(uint64_t seq) const;
  // Marks the group failed here, with `reason`, for the peers to read; the
  // first failure stays.
  void Fail(const absl::Status& reason);
  // OK, or the failure this process saw first.
  absl::Status failure() const;
  // The peers' later calls fail at once.
  void Leave(uint64_t last_seq);

 private:
  absl::Status PeerError(int local, uint64_t seq, const CollectiveCall& call) const;
  absl::Status WaitOne(int local, Phase phase, uint64_t seq, const CollectiveCall& call,
                       absl::Time deadline);
  // Sleeps (at most a millisecond) unless `counter` reached `seq`.
  void SleepOn(const std::atomic<uint64_t>& counter, uint64_t seq);
  // Wakes the peers asleep on any of this process's counters.
  void WakeAll();

  const std::shared_ptr<NodeRange> range_;
  const absl::Duration timeout_;
  mutable Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zero
