// One virtual address range shared by the processes of a node (one process
// per device, as torchrun runs them): every process reserves it at the same
// address, local process l owns slice l, and every process maps every
// peer's backed chunks at the same addresses, read-only. An address then
// means the same bytes in every process of the node, so a peer's buffer is
// read in place (node_communicator.h builds collectives on that).
//
// Host devices back a slice with one memfd per process (a file offset is the
// slice offset, so growth needs no more descriptors than the first one);
// the descriptors travel once, at Join, over an abstract Unix socket named
// by the key. Nothing is named in the file system: a killed process leaves
// nothing in /dev/shm, and its memory goes back once its peers drop it.
//
// The owner announces what it backs (a bit per chunk and a generation
// number in a header its peers map read-only); a peer's SyncView makes its
// view match: new chunks mapped read-only, trimmed ones protected again, so
// a stale read faults rather than reading recycled memory. A dead peer
// (CheckAlive) is dropped from the view, never waited for.
//
// Thread-safe. The owner's verbs are the backend's (node_backend.h); the
// views are synced by whoever reads peers (the node communicator).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace zero {

struct NodeRangeOptions {
  int local_rank = 0;
  int local_world = 1;
  // The same in every process of the node and unique per range: it names the
  // meeting point (an abstract socket, "zero-node-<key>").
  std::string key;
  // Each process's slice: a multiple of `chunk`, the same in every process.
  size_t slice_bytes = 0;
  size_t chunk = size_t{2} << 20;
  // For everyone to join, and for each message of the agreement.
  absl::Duration timeout = absl::Seconds(60);
  // The only address the leader proposes (tests); 0: the leader proposes
  // where its kernel finds room, and a process that cannot reserve there
  // proposes where it can (a few rounds).
  uintptr_t address = 0;
};

class NodeRange {
 public:
  static constexpr int kMaxLocalWorld = 64;
  // Bytes after each process's header that it alone writes and its peers
  // read (the node communicator's flags).
  static constexpr size_t kMailboxBytes = size_t{64} << 10;

  // Every local process calls it with the same key, world, slice and chunk.
  // Errors: InvalidArgument for bad options (or options that differ between
  // processes, named); DeadlineExceeded naming who did not join;
  // FailedPrecondition naming the process and address when the range cannot
  // be reserved at one address in every process.
  static absl::StatusOr<std::shared_ptr<NodeRange>> Join(const NodeRangeOptions& options);
  ~NodeRange();  // unmaps the range and the views; the memory goes with the last view
  NodeRange(const NodeRange&) = delete;
  NodeRange& operator=(const NodeRange&) = delete;

  int local_rank() const { return local_rank_; }
  int local_world() const { return local_world_; }
  const std::string& key() const { return key_; }
  uintptr_t base() const { return base_; }
  size_t slice_bytes() const { return slice_; }
  size_t chunk() const { return chunk_; }
  uintptr_t slice_begin(int local) const { return base_ + local * slice_; }
  // Address space the range takes in each process (no physical memory).
  size_t virtual_bytes() const { return slice_ * local_world_; }
  int pid(int local) const { return views_[local].pid; }

  struct Place {
    int local_rank;
    size_t offset;  // inside that process's slice
  };
  // Whose slice holds `ptr`, in constant time; nullopt outside the range.
  std::optional<Place> Locate(const void* ptr) const;

  // The owner's verbs, on chunk-aligned parts of its own slice: map the
  // memory (no access yet), open it (read-write here, announced to peers),
  // unmap it (withdrawn, pages given back, protected again).
  absl::Status MapOwn(uintptr_t addr, size_t bytes);
  absl::Status OpenOwn(uintptr_t addr, size_t bytes);
  absl::Status UnmapOwn(uintptr_t addr, size_t bytes);
  // What process `local` announces as backed, from its header.
  size_t announced_bytes(int local) const;
  // Physical memory process `local`'s memfd holds now (its pages, header
  // included; 0 once it left this view): no more than what it announced
  // and touched, whoever maps it.
  size_t resident_bytes(int local) const;

  // Makes this process's view of peer `local` match its announcements.
  // FailedPrecondition naming the peer when it died (its view is dropped).
  absl::Status SyncView(int local);
  // Bytes of peer `local`'s slice mapped in this process's view.
  size_t view_bytes(int local) const;
  // OK while process `local` runs; else FailedPrecondition naming it (local
  // rank and pid), and its slice leaves this process's view.
  absl::Status CheckAlive(int local);

  // Process `local`'s mailbox (kMailboxBytes, zeroed at Join): read-only for
  // peers, writable through own_mailbox().
  const void* mailbox(int local) const { return views_[local].mailbox; }
  void* own_mailbox() { return const_cast<void*>(views_[local_rank_].mailbox); }

 private:
  struct Header;
  struct View {
    int fd = -1;
    int pid = 0;
    int pidfd = -1;
    Header* header = nullptr;  // the mapping of header and mailbox
    const void* mailbox = nullptr;
    uint64_t generation = 0;       // last synced (peers)
    std::vector<uint64_t> mapped;  // chunks in this view, a bit each (peers)
    bool dead = false;
  };

  NodeRange(const NodeRangeOptions& options, uintptr_t base);
  size_t header_bytes() const;
  size_t words() const { return (slice_ / chunk_ + 63) / 64; }
  absl::Status CheckOwn(uintptr_t addr, size_t bytes, const char* verb) const;
  absl::Status MapHeaders();
  void Announce(uintptr_t addr, size_t bytes, bool backed);
  absl::Status ApplyView(int local, const std::vector<uint64_t>& want)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropView(int local) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeadError(int local) const;
  friend class NodeRangeJoin;

  const int local_rank_;
  const int local_world_;
  const std::string key_;
  const uintptr_t base_;
  const size_t slice_;
  const size_t chunk_;
  mutable Mutex mu_;  // the views' mappings
  std::vector<View> views_;
};

}  // namespace zero
