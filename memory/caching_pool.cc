#include "memory/caching_pool.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/units.h"

namespace zero {

absl::Status CachingPool::CheckOptions(const CachingPoolOptions& options, size_t max_alignment,
                                       std::string_view what) {
  if (IsPowerOfTwo(options.round_to) && options.round_to <= max_alignment) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: round_to (%d) must be a power of two up to %d", what, options.round_to, max_alignment));
}

CachingPool::CachingPool(int device, size_t capacity, size_t max_alignment,
                         CachingPoolOptions options)
    : device_(device),
      capacity_(capacity),
      max_alignment_(max_alignment),
      options_(options),
      timeline_(options.timeline_limit) {
  stats_.device = device;
  stats_.capacity = capacity;
}

absl::Status CachingPool::CheckRequest(size_t bytes, size_t alignment) const {
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: cannot allocate zero bytes", Name()));
  }
  if (!IsPowerOfTwo(alignment) || alignment > max_alignment_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: alignment %d must be a power of two no larger than %d", Name(),
                        alignment, max_alignment_));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> CachingPool::DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                              Stream* stream) {
  stream = Resolve(stream);
  // Checked before the lock: they read nothing it guards.
  absl::Status valid = CheckRequest(bytes, alignment);
  if (valid.ok()) valid = CheckStream(stream, "allocation");
  MutexLock lock(mu_);
  if (!valid.ok()) return Rejected(valid);
  if (bytes > capacity_) return OutOfMemory(bytes, tag, "larger than the whole pool");
  const size_t size = AlignUp(bytes, options_.round_to);
  BlockMap::iterator it;
  if (std::optional<FrontCache::Entry> cached = front_.Take(stream, size, alignment)) {
    it = cached->block;  // stream order covers its last use: no event, no split
    it->second.cached = false;
  } else {
    ASSIGN_OR_RETURN(it, FitOrGrow(bytes, size, alignment, tag, stream));
  }
  Block& block = it->second;
  block.requested = bytes;
  block.tag = tag;
  CountAlloc(stats_, block.size, block.requested, block.tag);
  timeline_.Add(TraceAction::kAlloc, device_, it->first, bytes, tag, stream);
  return reinterpret_cast<void*>(it->first);
}

// The best fit among the free blocks, the front cache flushed into them
// first (so a miss sees them coalesced, as without the cache), else grown
// memory; carved and ordered after its pending uses.
absl::StatusOr<CachingPool::BlockMap::iterator> CachingPool::FitOrGrow(size_t bytes,
                                                                       size_t size,
                                                                       size_t alignment, Tag tag,
                                                                       Stream* stream) {
  FlushFront();
  BlockMap::iterator it = blocks_.FindFit(size, alignment, stream);
  if (it == blocks_.blocks().end()) {
    absl::StatusOr<BlockMap::iterator> grown = GrowOrTrim(size, alignment);
    if (!grown.ok()) {
      if (!absl::IsResourceExhausted(grown.status())) return grown.status();
      return OutOfMemory(bytes, tag, grown.status().message());
    }
    it = *grown;
  }
  RETURN_IF_ERROR(BlockSet::OrderAfterUses(it->second, stream));
  return blocks_.Carve(it, size, alignment, stream);
}

// Frees the cached blocks into the free blocks, with the uses their frees
// recorded.
void CachingPool::FlushFront() {
  for (const FrontCache::Entry& e : front_.TakeAll()) FreeCached(e);
}

void CachingPool::FreeCached(const FrontCache::Entry& entry) {
  blocks_.Release(entry.block, entry.uses);
}

absl::StatusOr<CachingPool::BlockMap::iterator> CachingPool::GrowOrTrim(size_t size,
                                                                        size_t alignment) {
  absl::StatusOr<BlockMap::iterator> grown = Grow(size, alignment);
  if (grown.ok() || !absl::IsResourceExhausted(grown.status())) return grown;
  FlushFront();
  ASSIGN_OR_RETURN(size_t released, TrimLocked());
  if (released == 0) return grown;
  return Grow(size, alignment);
}

CachingPool::BlockMap::iterator CachingPool::AddMapped(uintptr_t addr, size_t bytes,
                                                       uint32_t segment) {
  stats_.reserved += bytes;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  ++stats_.num_maps;
  timeline_.Add(TraceAction::kSegmentMap, device_, addr, bytes, Tag::kOther, nullptr);
  return blocks_.Coalesce(blocks_.InsertFree(
      addr, Block{.size = bytes, .segment = segment, .users = {}, .pending = {}}));
}

void CachingPool::Released(uintptr_t addr, size_t bytes) {
  stats_.reserved -= bytes;
  ++stats_.num_unmaps;
  timeline_.Add(TraceAction::kSegmentUnmap, device_, addr, bytes, Tag::kOther, nullptr);
}

absl::Status CachingPool::DoDeallocate(void* ptr, size_t bytes, Stream* stream) {
  stream = Resolve(stream);
  MutexLock lock(mu_);
  if (absl::Status owned = CheckOwned(ptr); !owned.ok()) return Rejected(owned);
  absl::StatusOr<BlockMap::iterator> found =
      blocks_.FindAllocated(reinterpret_cast<uintptr_t>(ptr), bytes);
  if (!found.ok()) return Rejected(Annotate(found.status(), Name()));
  if (absl::Status s = CheckStream(stream, "free"); !s.ok()) return Rejected(s);
  const uintptr_t addr = (*found)->first;
  Block& block = (*found)->second;
  const size_t size = block.size, requested = block.requested;
  const Tag tag = block.tag;
  if (OnlyUsedOn(block, stream)) {
    // Kept for this stream's next request of the size; booked as free (and
    // coalesced) only when it leaves the cache.
    absl::StatusOr<PendingUses> uses = blocks_.RecordUses(block, stream);
    if (!uses.ok()) return Rejected(Annotate(uses.status(), Name()));
    block.cached = true;
    block.requested = 0;
    if (std::optional<FrontCache::Entry> evicted =
            front_.Put({stream, size, *found, *std::move(uses)})) {
      FreeCached(*evicted);
    }
  } else {
    // Events first: a failed record leaves the block allocated and uncounted.
    absl::StatusOr<BlockMap::iterator> freed = blocks_.Free(*found, stream);
    if (!freed.ok()) return Rejected(Annotate(freed.status(), Name()));
  }
  CountFree(stats_, size, requested, tag);
  timeline_.Add(TraceAction::kFreeCompleted, device_, addr, bytes, tag, stream);
  return absl::OkStatus();
}

// Whether only `stream` used the block (allocated there, no RecordStream of
// another): then its next use on `stream` is ordered by the stream alone.
bool CachingPool::OnlyUsedOn(const Block& block, Stream* stream) {
  if (stream == nullptr) return block.users.empty();
  return block.users.empty() || (block.users.size() == 1 && block.users[0] == stream);
}

absl::Status CachingPool::RecordStream(void* ptr, Stream* stream) {
  stream = Resolve(stream);
  MutexLock lock(mu_);
  auto it = blocks_.blocks().find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.blocks().end() || !it->second.allocated || it->second.cached) {
    return Rejected(absl::NotFoundError(
        absl::StrFormat("%s: RecordStream on %p, which is not allocated", Name(), ptr)));
  }
  // The host (null) is done with the bytes when it frees them.
  if (stream != nullptr) AddStream(it->second.users, stream);
  return absl::OkStatus();
}

void CachingPool::FlushCache() {
  MutexLock lock(mu_);
  FlushFront();
}

absl::StatusOr<size_t> CachingPool::Trim() {
  MutexLock lock(mu_);
  FlushFront();
  return TrimLocked();
}

void CachingPool::SynchronizeAll() {
  FlushFront();
  StreamList users;
  for (auto& [addr, block] : blocks_.blocks()) {
    MergeStreams(users, block.users);
    (void)BlockSet::WaitForPending(block);
  }
  for (Stream* s : users) (void)s->Synchronize();
}

absl::Status CachingPool::OutOfMemory(size_t bytes, Tag tag, absl::string_view why) {
  ++stats_.num_ooms;
  timeline_.Add(TraceAction::kOom, device_, 0, bytes, tag, nullptr);
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s: out of memory allocating %s for %s (%s): %s allocated, %s reserved%s, "
      "%s free of %s capacity, largest free block %s",
      Describe(), FormatBytes(bytes), std::string(TagName(tag)), std::string(why),
      FormatBytes(stats_.allocated), FormatBytes(stats_.reserved), ReservedDetail(),
      FormatBytes(capacity_ - stats_.allocated), FormatBytes(capacity_),
      FormatBytes(blocks_.largest_free())));
}

absl::Status CachingPool::Rejected(absl::Status status) {
  ++stats_.num_errors;
  return status;
}

PoolStats CachingPool::stats() const {
  MutexLock lock(mu_);
  return Reported(stats_, std::max(blocks_.largest_free(), front_.largest()));
}

void CachingPool::ResetPeaks() {
  MutexLock lock(mu_);
  zero::ResetPeaks(stats_);
}

std::vector<SegmentInfo> CachingPool::Segments() const {
  MutexLock lock(mu_);
  std::vector<SegmentInfo> segments;
  uint32_t segment = 0;
  for (const auto& [addr, block] : blocks_.blocks()) {
    if (segments.empty() || segments.back().address + segments.back().size != addr ||
        block.segment != segment) {
      segments.push_back(SegmentInfo{addr, 0, {}});
      segment = block.segment;
    }
    segments.back().size += block.size;
    // A cached block is free to callers.
    segments.back().blocks.push_back(BlockInfo{addr, block.size, block.requested,
                                               block.allocated && !block.cached, block.tag});
  }
  return segments;
}

// The JSON shape of torch.cuda.memory._snapshot()["segments"].
std::string CachingPool::SnapshotJson() const {
  std::string out = absl::StrFormat("{\"device\":%d,\"segments\":[", device_);
  const char* segment_sep = "";
  for (const SegmentInfo& segment : Segments()) {
    absl::StrAppendFormat(&out, "%s{\"address\":%d,\"total_size\":%d,\"blocks\":[",
                          segment_sep, segment.address, segment.size);
    const char* block_sep = "";
    for (const BlockInfo& b : segment.blocks) {
      absl::StrAppendFormat(
          &out, "%s{\"address\":%d,\"size\":%d,\"requested_size\":%d,\"state\":\"%s\",\"tag\":\"%s\"}",
          block_sep, b.address, b.size, b.requested, b.allocated ? "active_allocated" : "inactive",
          b.allocated ? std::string(TagName(b.tag)) : "");
      block_sep = ",";
    }
    out += "]}";
    segment_sep = ",";
  }
  out += "]}";
  return out;
}

}  // namespace zero
