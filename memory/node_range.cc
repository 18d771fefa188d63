// The range's mappings: the owner's slice, the peers' views, liveness.
// How the processes agree on the range is node_range_join.cc.
#include "memory/node_range.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/units.h"
#include "memory/internal/mapping_error.h"

namespace zero {
namespace {

using internal::MappingError;

constexpr size_t kPage = 4096;
constexpr size_t kHeaderFixed = 64;  // the Header fields before the bits

// Back to reserved-only: no memory, no access, the address kept.
absl::Status Protect(uintptr_t addr, size_t bytes) {
  void* p = mmap(reinterpret_cast<void*>(addr), bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? MappingError("mmap(PROT_NONE)", addr, bytes) : absl::OkStatus();
}

}  // namespace

// At file offset slice_bytes of each process's memfd; peers map it read-only.
struct NodeRange::Header {
  std::atomic<uint64_t> generation;  // bumped after every change of the bits

  std::atomic<uint64_t>* bits() {
    return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<char*>(this) + kHeaderFixed);
  }
};
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "the header's atomics are shared between processes");

NodeRange::NodeRange(const NodeRangeOptions& options, uintptr_t base)
    : local_rank_(options.local_rank),
      local_world_(options.local_world),
      key_(options.key),
      base_(base),
      slice_(options.slice_bytes),
      chunk_(options.chunk),
      views_(options.local_world) {}

NodeRange::~NodeRange() {
  munmap(reinterpret_cast<void*>(base_), virtual_bytes());
  for (View& view : views_) {
    if (view.header != nullptr) munmap(view.header, header_bytes() + kMailboxBytes);
    if (view.fd >= 0) close(view.fd);
    if (view.pidfd >= 0) close(view.pidfd);
  }
}

size_t NodeRange::header_bytes() const { return AlignUp(kHeaderFixed + words() * 8, kPage); }

// After the descriptors arrived: every header mapped (zeros: nothing backed).
absl::Status NodeRange::MapHeaders() {
  const size_t bytes = header_bytes() + kMailboxBytes;
  for (int l = 0; l < local_world_; ++l) {
    View& view = views_[l];
    const bool own = l == local_rank_;
    void* p = mmap(nullptr, bytes, own ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, view.fd,
                   static_cast<off_t>(slice_));
    if (p == MAP_FAILED) return MappingError("mmap(header)", 0, bytes);
    view.header = static_cast<Header*>(p);
    view.mailbox = static_cast<char*>(p) + header_bytes();
    view.mapped.assign(words(), 0);
  }
  return absl::OkStatus();
}

std::optional<NodeRange::Place> NodeRange::Locate(const void* ptr) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p < base_ || p - base_ >= virtual_bytes()) return std::nullopt;
  return Place{static_cast<int>((p - base_) / slice_), (p - base_) % slice_};
}

absl::Status NodeRange::CheckOwn(uintptr_t addr, size_t bytes, const char* verb) const {
  const uintptr_t begin = slice_begin(local_rank_);
  if (bytes == 0 || addr < begin || addr - begin > slice_ || bytes > slice_ - (addr - begin) ||
      (addr - begin) % chunk_ != 0 || bytes % chunk_ != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node range '%s': cannot %s %s at %#x: local rank %d owns [%#x, %#x) in %s chunks", key_,
        verb, FormatBytes(bytes), addr, local_rank_, begin, begin + slice_, FormatBytes(chunk_)));
  }
  return absl::OkStatus();
}

absl::Status NodeRange::MapOwn(uintptr_t addr, size_t bytes) {
  if (absl::Status s = CheckOwn(addr, bytes, "map"); !s.ok()) return s;
  const off_t offset = static_cast<off_t>(addr - slice_begin(local_rank_));
  void* p = mmap(reinterpret_cast<void*>(addr), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 views_[local_rank_].fd, offset);
  return p == MAP_FAILED ? MappingError("mmap(memfd)", addr, bytes) : absl::OkStatus();
}

absl::Status NodeRange::OpenOwn(uintptr_t addr, size_t bytes) {
  if (absl::Status s = CheckOwn(addr, bytes, "open"); !s.ok()) return s;
  if (mprotect(reinterpret_cast<void*>(addr), bytes, PROT_READ | PROT_WRITE) != 0) {
    return MappingError("mprotect", addr, bytes);
  }
  Announce(addr, bytes, true);
  return absl::OkStatus();
}

absl::Status NodeRange::UnmapOwn(uintptr_t addr, size_t bytes) {
  if (absl::Status s = CheckOwn(addr, bytes, "unmap"); !s.ok()) return s;
  Announce(addr, bytes, false);  // withdrawn before the pages go
  const off_t offset = static_cast<off_t>(addr - slice_begin(local_rank_));
  if (fallocate(views_[local_rank_].fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                static_cast<off_t>(bytes)) != 0) {
    return MappingError("fallocate(PUNCH_HOLE)", addr, bytes);
  }
  return Protect(addr, bytes);
}

// Serialized by the caller's space (the owner maps and unmaps disjoint
// chunks; each bit has one writer at a time), so fetch_or/and suffice.
void NodeRange::Announce(uintptr_t addr, size_t bytes, bool backed) {
  Header* header = views_[local_rank_].header;
  const size_t first = (addr - slice_begin(local_rank_)) / chunk_;
  const size_t count = bytes / chunk_;
  for (size_t c = first; c < first + count; ++c) {
    const uint64_t bit = uint64_t{1} << (c % 64);
    if (backed) {
      header->bits()[c / 64].fetch_or(bit, std::memory_order_relaxed);
    } else {
      header->bits()[c / 64].fetch_and(~bit, std::memory_order_relaxed);
    }
  }
  header->generation.fetch_add(1, std::memory_order_release);
}

size_t NodeRange::announced_bytes(int local) const {
  Header* header = views_[local].header;
  size_t chunks = 0;
  for (size_t w = 0; w < words(); ++w) {
    chunks += std::popcount(header->bits()[w].load(std::memory_order_acquire));
  }
  return chunks * chunk_;
}

size_t NodeRange::resident_bytes(int local) const {
  MutexLock lock(mu_);
  struct stat st;
  if (views_[local].fd < 0 || fstat(views_[local].fd, &st) != 0) return 0;
  return static_cast<size_t>(st.st_blocks) * 512;
}

absl::Status NodeRange::SyncView(int local) {
  if (local == local_rank_) return absl::OkStatus();
  MutexLock lock(mu_);
  View& view = views_[local];
  if (view.dead) return DeadError(local);
  Header* header = view.header;
  const uint64_t generation = header->generation.load(std::memory_order_acquire);
  if (generation == view.generation) return absl::OkStatus();
  // A change after the load bumps the generation again: the next sync sees it.
  std::vector<uint64_t> want(words());
  for (size_t w = 0; w < want.size(); ++w) {
    want[w] = header->bits()[w].load(std::memory_order_relaxed);
  }
  if (absl::Status s = ApplyView(local, want); !s.ok()) return s;
  view.generation = generation;
  return absl::OkStatus();
}

// Maps and protects runs of chunks whose state differs from `want`.
absl::Status NodeRange::ApplyView(int local, const std::vector<uint64_t>& want) {
  View& view = views_[local];
  const size_t chunks = slice_ / chunk_;
  auto bit = [](const std::vector<uint64_t>& v, size_t c) { return (v[c / 64] >> (c % 64)) & 1; };
  for (size_t c = 0; c < chunks;) {
    if (bit(want, c) == bit(view.mapped, c)) {
      ++c;
      continue;
    }
    const uint64_t backed = bit(want, c);
    size_t end = c + 1;
    while (end < chunks && bit(want, end) == backed && bit(view.mapped, end) != backed) ++end;
    const uintptr_t addr = slice_begin(local) + c * chunk_;
    const size_t bytes = (end - c) * chunk_;
    if (backed) {
      void* p = mmap(reinterpret_cast<void*>(addr), bytes, PROT_READ, MAP_SHARED | MAP_FIXED,
                     view.fd, static_cast<off_t>(c * chunk_));
      if (p == MAP_FAILED) return MappingError("mmap(peer)", addr, bytes);
    } else if (absl::Status s = Protect(addr, bytes); !s.ok()) {
      return s;
    }
    for (size_t i = c; i < end; ++i) view.mapped[i / 64] ^= uint64_t{1} << (i % 64);
    c = end;
  }
  return absl::OkStatus();
}

size_t NodeRange::view_bytes(int local) const {
  MutexLock lock(mu_);
  if (local == local_rank_) return announced_bytes(local);
  size_t chunks = 0;
  for (uint64_t w : views_[local].mapped) chunks += std::popcount(w);
  return chunks * chunk_;
}

absl::Status NodeRange::DeadError(int local) const {
  return absl::FailedPreconditionError(
      absl::StrFormat("node range '%s': local rank %d (pid %d) exited; its memory left this "
                      "process's view",
                      key_, local, views_[local].pid));
}

absl::Status NodeRange::CheckAlive(int local) {
  if (local == local_rank_) return absl::OkStatus();
  MutexLock lock(mu_);
  View& view = views_[local];
  if (view.dead) return DeadError(local);
  bool exited;
  if (view.pidfd >= 0) {
    pollfd p{view.pidfd, POLLIN, 0};
    exited = poll(&p, 1, 0) > 0;  // a pidfd reads as ready once its process exited
  } else {
    exited = kill(view.pid, 0) != 0 && errno == ESRCH;
  }
  if (!exited) return absl::OkStatus();
  DropView(local);
  return DeadError(local);
}

// Its slice protected and its header replaced by a private copy, so that no
// mapping of its memfd remains here: the memory goes once every peer does
// the same, and pointers into its mailbox still read its last flags.
void NodeRange::DropView(int local) {
  View& view = views_[local];
  view.dead = true;
  (void)Protect(slice_begin(local), slice_);
  std::fill(view.mapped.begin(), view.mapped.end(), 0);
  const size_t bytes = header_bytes() + kMailboxBytes;
  std::vector<char> copy(bytes);
  std::memcpy(copy.data(), view.header, bytes);
  void* p = mmap(view.header, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (p != MAP_FAILED) {
    std::memcpy(p, copy.data(), bytes);
    mprotect(p, bytes, PROT_READ);
  }
  close(view.fd);
  view.fd = -1;
}

}  // namespace zero
