#include "memory/internal/block_set.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/units.h"

namespace zero {

void AddStream(StreamList& streams, Stream* stream) {
  if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
    streams.push_back(stream);
  }
}

void MergeStreams(StreamList& into, const StreamList& from) {
  for (Stream* s : from) AddStream(into, s);
}

void MergePending(PendingUses& into, const PendingUses& from) {
  for (const PendingUse& use : from) {
    if (use.event->Query()) continue;
    auto same = std::find_if(into.begin(), into.end(),
                             [&](const PendingUse& u) { return u.stream == use.stream; });
    if (same == into.end()) {
      into.push_back(use);
    } else if (same->order < use.order) {
      *same = use;
    }
  }
}

BlockSet::iterator BlockSet::FindFit(size_t size, size_t alignment, Stream* user) {
  iterator best = blocks_.end();
  int looked = 0;
  for (auto f = free_.lower_bound({size, 0}); f != free_.end(); ++f) {
    if (AlignUp(f->second, alignment) + size > f->second + f->first) continue;
    if (best != blocks_.end() &&
        (f->first > kSameStreamSlack * best->second.size || ++looked > kSameStreamLook)) {
      break;
    }
    const iterator it = blocks_.find(f->second);
    if (!MustWait(it->second, user)) return it;
    if (best == blocks_.end()) best = it;
  }
  return best;
}

BlockSet::iterator BlockSet::Carve(iterator it, size_t size, size_t alignment, Stream* user) {
  const uintptr_t addr = it->first;
  const uintptr_t block_end = addr + it->second.size;
  const uintptr_t start = AlignUp(addr, alignment);
  const uintptr_t end = start + size;
  const uint32_t segment = it->second.segment;
  free_.erase({it->second.size, addr});
  // Neighbours of a free block are never free, so the pieces need no
  // coalescing. The common case (no alignment padding) reuses the node.
  if (block_end > end) {
    // The rest keeps only the uses still running: a finished one's event
    // goes back to its stream's pool instead of riding along from
    // remainder to remainder (which would make the pool grow).
    PendingUses running;
    MergePending(running, it->second.pending);
    InsertFree(end, Block{.size = block_end - end, .segment = segment, .users = {},
                          .pending = std::move(running)});
  }
  StreamList users;
  if (user != nullptr) users.push_back(user);
  if (start > addr) {
    Block used{.size = size, .allocated = true, .segment = segment, .users = std::move(users),
               .pending = {}};
    it->second.size = start - addr;
    free_.emplace(it->second.size, addr);
    return blocks_.emplace(start, std::move(used)).first;
  }
  it->second.size = size;
  it->second.allocated = true;
  it->second.users = std::move(users);
  it->second.pending.clear();
  return it;
}

BlockSet::iterator BlockSet::InsertFree(uintptr_t addr, Block block) {
  block.allocated = false;
  block.requested = 0;
  free_.emplace(block.size, addr);
  return blocks_.emplace(addr, std::move(block)).first;
}

void BlockSet::EraseFree(iterator it) {
  free_.erase({it->second.size, it->first});
  blocks_.erase(it);
}

// `it` is a free block whose free_ entry is up to date; merges it with free
// neighbours in place and returns the merged block.
BlockSet::iterator BlockSet::Coalesce(iterator it) {
  auto mergeable = [](const auto& lo, const auto& hi) {
    return !lo.second.allocated && !hi.second.allocated &&
           lo.second.segment == hi.second.segment && lo.first + lo.second.size == hi.first;
  };
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (mergeable(*prev, *it)) {
      free_.erase({prev->second.size, prev->first});
      free_.erase({it->second.size, it->first});
      prev->second.size += it->second.size;
      MergePending(prev->second.pending, it->second.pending);
      blocks_.erase(it);
      it = prev;
      free_.emplace(it->second.size, it->first);
    }
  }
  auto next = std::next(it);
  if (next != blocks_.end() && mergeable(*it, *next)) {
    free_.erase({it->second.size, it->first});
    it->second.size += next->second.size;
    MergePending(it->second.pending, next->second.pending);
    EraseFree(next);
    free_.emplace(it->second.size, it->first);
  }
  return it;
}

absl::StatusOr<PendingUses> BlockSet::RecordUses(const Block& block, Stream* stream) {
  StreamList users = block.users;
  if (stream != nullptr) AddStream(users, stream);
  const uint64_t order = ++frees_;
  PendingUses recorded;
  for (Stream* user : users) {
    absl::StatusOr<std::shared_ptr<Event>> event = user->Record();
    if (event.ok()) {
      if (!(*event)->Query()) recorded.push_back(PendingUse{user, *std::move(event), order});
      continue;
    }
    // No event: wait for the stream here rather than keep the block
    // allocated with a user whose every later free would fail the same way.
    if (absl::Status waited = user->Synchronize(); !waited.ok()) {
      return absl::Status(waited.code(),
                          absl::StrCat("freeing a block: its stream's event failed (",
                                       event.status().message(), ") and so did waiting for it: ",
                                       waited.message()));
    }
  }
  return recorded;
}

BlockSet::iterator BlockSet::Release(iterator it, const PendingUses& recorded) {
  Block& block = it->second;
  block.users.clear();
  block.pending.clear();
  block.cached = false;
  MergePending(block.pending, recorded);
  block.allocated = false;
  block.requested = 0;
  free_.emplace(block.size, it->first);
  return Coalesce(it);
}

absl::StatusOr<BlockSet::iterator> BlockSet::Free(iterator it, Stream* stream) {
  absl::StatusOr<PendingUses> recorded = RecordUses(it->second, stream);
  if (!recorded.ok()) return recorded.status();
  return Release(it, *recorded);
}

absl::StatusOr<BlockSet::iterator> BlockSet::FindAllocated(uintptr_t addr, size_t bytes) {
  const void* ptr = reinterpret_cast<const void*>(addr);
  auto it = blocks_.find(addr);
  if (it == blocks_.end()) {
    auto after = blocks_.upper_bound(addr);
    if (after != blocks_.begin()) {
      auto holder = std::prev(after);
      if (addr < holder->first + holder->second.size) {
        if (holder->second.allocated) {
          return absl::NotFoundError(absl::StrFormat(
              "%p points inside the block allocated at %#x, not at its start", ptr,
              holder->first));
        }
        // A freed block merges into a free neighbour below it, so its own
        // start is gone: a second free lands inside free memory.
        return absl::FailedPreconditionError(absl::StrFormat(
            "double free of %p (it lies inside the free block at %#x)", ptr, holder->first));
      }
    }
    return absl::NotFoundError(absl::StrFormat("%p was not allocated by this pool", ptr));
  }
  if (!it->second.allocated || it->second.cached) {
    return absl::FailedPreconditionError(absl::StrFormat("double free of %p", ptr));
  }
  if (bytes != it->second.requested) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%p was allocated with %d bytes but freed with %d", ptr,
                        it->second.requested, bytes));
  }
  return it;
}

bool BlockSet::MustWait(const Block& block, Stream* stream) {
  return std::any_of(block.pending.begin(), block.pending.end(), [&](const PendingUse& use) {
    return use.stream != stream && !use.event->Query();
  });
}

absl::Status BlockSet::OrderAfterUses(const Block& block, Stream* stream) {
  for (const PendingUse& use : block.pending) {
    if (use.stream == stream || use.event->Query()) continue;
    RETURN_IF_ERROR(stream != nullptr ? stream->Wait(use.event) : use.event->Synchronize());
  }
  return absl::OkStatus();
}

absl::Status BlockSet::WaitForPending(Block& block) {
  for (const PendingUse& use : block.pending) RETURN_IF_ERROR(use.event->Synchronize());
  block.pending.clear();
  return absl::OkStatus();
}

}  // namespace zero
