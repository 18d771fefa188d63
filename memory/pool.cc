#include "memory/pool.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "memory/status_macros.h"
#include "memory/units.h"

namespace zero {
namespace {

template <typename List>
void AddStream(List& streams, Stream* stream) {
  if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
    streams.push_back(stream);
  }
}

template <typename List>
void MergeStreams(List& into, const List& from) {
  for (Stream* s : from) AddStream(into, s);
}

}  // namespace

DevicePool::DevicePool(int device, UvaSpace* space, Stream* default_stream, PoolOptions options)
    : device_(device),
      space_(space),
      default_stream_(default_stream),
      options_(options),
      slice_begin_(space->slice_begin(device)),
      slice_end_(space->slice_begin(device) + space->slice_size()),
      timeline_(options.timeline_limit) {
  unmapped_[slice_begin_] = space->slice_size();
  stats_.device = device;
  stats_.capacity = space->backend().capacity(device);
}

DevicePool::~DevicePool() {
  std::lock_guard<std::mutex> lock(mu_);
  StreamList streams;
  for (auto& [addr, block] : blocks_) MergeStreams(streams, block.streams);
  for (Stream* s : streams) (void)s->Synchronize();
  // Unmap each maximal mapped run in one call.
  auto it = blocks_.begin();
  while (it != blocks_.end()) {
    const uintptr_t begin = it->first;
    uintptr_t end = begin;
    while (it != blocks_.end() && it->first == end) end = it->first + (it++)->second.size;
    (void)space_->Unmap(device_, begin, end - begin);
  }
}

absl::Status DevicePool::CheckRequest(size_t bytes, size_t alignment) const {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device %d: cannot allocate zero bytes", device_));
  }
  if (!IsPowerOfTwo(alignment) || alignment > space_->granularity()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d: alignment %d must be a power of two no larger than %d", device_,
        alignment, space_->granularity()));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> DevicePool::DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                             Stream* stream) {
  if (stream == nullptr) stream = default_stream_;
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status valid = CheckRequest(bytes, alignment);
  if (valid.ok() && stream->device() != device_) {
    valid = absl::InvalidArgumentError(absl::StrFormat(
        "device %d: allocation on a stream of device %d", device_, stream->device()));
  }
  if (!valid.ok()) {
    ++stats_.num_errors;
    return valid;
  }
  if (bytes > stats_.capacity) return OutOfMemory(bytes, tag, "larger than the whole device");
  const size_t size = AlignUp(bytes, options_.round_to);
  BlockMap::iterator it = FindFit(size, alignment);
  if (it == blocks_.end()) {
    const size_t slack = alignment > options_.round_to ? alignment - options_.round_to : 0;
    absl::StatusOr<BlockMap::iterator> grown = Grow(size + slack);
    if (!grown.ok()) {
      if (absl::IsResourceExhausted(grown.status())) {
        return OutOfMemory(bytes, tag, grown.status().message());
      }
      return grown.status();
    }
    it = *grown;
  }
  RETURN_IF_ERROR(OrderAfterUses(it->second, stream));
  it = Carve(it, size, alignment);
  Block& block = it->second;
  block.requested = bytes;
  block.tag = tag;
  CountAlloc(block);
  timeline_.Add(TraceAction::kAlloc, device_, it->first, bytes, tag, stream);
  return reinterpret_cast<void*>(it->first);
}

DevicePool::BlockMap::iterator DevicePool::FindFit(size_t size, size_t alignment) {
  for (auto f = free_.lower_bound({size, 0}); f != free_.end(); ++f) {
    const uintptr_t start = AlignUp(f->second, alignment);
    if (start + size <= f->second + f->first) return blocks_.find(f->second);
  }
  return blocks_.end();
}

// Picks the cheapest way to make a free block of `need` bytes: extend a free
// block that borders unmapped space, bridge a gap between two free blocks,
// or map a fresh range. Trims and retries once when the device is full.
absl::StatusOr<DevicePool::BlockMap::iterator> DevicePool::Grow(size_t need) {
  const size_t g = space_->granularity();
  for (int attempt = 0;; ++attempt) {
    uintptr_t best_addr = 0;
    size_t best_bytes = 0;
    auto consider = [&](uintptr_t addr, size_t bytes, size_t room) {
      if (bytes == 0 || bytes > room) return;
      if (best_bytes == 0 || bytes < best_bytes) best_addr = addr, best_bytes = bytes;
    };
    for (const auto& [u, len] : unmapped_) {
      size_t before = 0, after = 0;
      auto next = blocks_.lower_bound(u);
      if (next != blocks_.begin()) {
        auto prev = std::prev(next);
        if (!prev->second.allocated && prev->first + prev->second.size == u) {
          before = prev->second.size;
        }
      }
      if (next != blocks_.end() && next->first == u + len && !next->second.allocated) {
        after = next->second.size;
      }
      consider(u, AlignUp(need - std::min(need, before), g), len);
      const size_t down = AlignUp(need - std::min(need, after), g);
      if (down <= len) consider(u + len - down, down, len);
      if (before + len + after >= need) consider(u, len, len);
    }
    absl::Status status =
        best_bytes == 0 ? absl::ResourceExhaustedError("no room left in the device's slice")
                        : absl::OkStatus();
    if (status.ok()) {
      absl::StatusOr<BlockMap::iterator> it = MapFree(best_addr, best_bytes);
      if (it.ok() && (*it)->second.size >= need) return it;
      status = it.ok() ? absl::InternalError("grown block too small") : it.status();
    }
    if (attempt > 0 || !absl::IsResourceExhausted(status)) return status;
    ASSIGN_OR_RETURN(size_t released, TrimLocked());
    if (released == 0) return status;
  }
}

absl::StatusOr<DevicePool::BlockMap::iterator> DevicePool::MapFree(uintptr_t addr,
                                                                   size_t bytes) {
  RETURN_IF_ERROR(space_->Map(device_, addr, bytes));
  TakeUnmapped(addr, bytes);
  stats_.reserved += bytes;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  ++stats_.num_maps;
  timeline_.Add(TraceAction::kSegmentMap, device_, addr, bytes, Tag::kOther, nullptr);
  return Coalesce(InsertFree(addr, Block{.size = bytes, .streams = {}}));
}

DevicePool::BlockMap::iterator DevicePool::Carve(BlockMap::iterator it, size_t size,
                                                 size_t alignment) {
  const uintptr_t addr = it->first;
  const uintptr_t block_end = addr + it->second.size;
  const uintptr_t start = AlignUp(addr, alignment);
  const uintptr_t end = start + size;
  free_.erase({it->second.size, addr});
  // Neighbours of a free block are never free, so the pieces need no
  // coalescing. The common case (no alignment padding) reuses the node.
  if (block_end > end) InsertFree(end, Block{.size = block_end - end, .streams = it->second.streams});
  if (start > addr) {
    Block used{.size = size, .allocated = true, .streams = it->second.streams};
    it->second.size = start - addr;
    free_.emplace(it->second.size, addr);
    return blocks_.emplace(start, std::move(used)).first;
  }
  it->second.size = size;
  it->second.allocated = true;
  return it;
}

// Makes `stream` wait for every other stream that may still use the block.
// Waiting is transitive, so afterwards `stream` alone stands for all of them.
absl::Status DevicePool::OrderAfterUses(Block& block, Stream* stream) {
  for (Stream* other : block.streams) {
    if (other == stream) continue;
    ASSIGN_OR_RETURN(std::shared_ptr<Event> event, other->Record());
    if (!event->Query()) RETURN_IF_ERROR(stream->Wait(event));
  }
  block.streams.assign(1, stream);
  return absl::OkStatus();
}

DevicePool::BlockMap::iterator DevicePool::InsertFree(uintptr_t addr, Block block) {
  block.allocated = false;
  block.requested = 0;
  free_.emplace(block.size, addr);
  return blocks_.emplace(addr, std::move(block)).first;
}

void DevicePool::EraseFree(BlockMap::iterator it) {
  free_.erase({it->second.size, it->first});
  blocks_.erase(it);
}

// `it` is a free block whose free_ entry is up to date; merges it with free
// neighbours in place and returns the merged block.
DevicePool::BlockMap::iterator DevicePool::Coalesce(BlockMap::iterator it) {
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (!prev->second.allocated && prev->first + prev->second.size == it->first) {
      free_.erase({prev->second.size, prev->first});
      free_.erase({it->second.size, it->first});
      prev->second.size += it->second.size;
      MergeStreams(prev->second.streams, it->second.streams);
      blocks_.erase(it);
      it = prev;
      free_.emplace(it->second.size, it->first);
    }
  }
  auto next = std::next(it);
  if (next != blocks_.end() && !next->second.allocated &&
      it->first + it->second.size == next->first) {
    free_.erase({it->second.size, it->first});
    it->second.size += next->second.size;
    MergeStreams(it->second.streams, next->second.streams);
    EraseFree(next);
    free_.emplace(it->second.size, it->first);
  }
  return it;
}

absl::Status DevicePool::DoDeallocate(void* ptr, size_t bytes, Stream* stream) {
  if (stream == nullptr) stream = default_stream_;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  if (addr < slice_begin_ || addr >= slice_end_) {
    std::optional<int> owner = space_->device_of(ptr);
    return BadFree(absl::NotFoundError(
        owner ? absl::StrFormat("device %d: %p belongs to device %d, not this one", device_,
                                ptr, *owner)
              : absl::StrFormat("device %d: %p is not in the UVA space", device_, ptr)));
  }
  auto it = blocks_.find(addr);
  if (it == blocks_.end()) {
    auto after = blocks_.upper_bound(addr);
    if (after != blocks_.begin()) {
      auto holder = std::prev(after);
      if (holder->second.allocated && addr < holder->first + holder->second.size) {
        return BadFree(absl::NotFoundError(absl::StrFormat(
            "device %d: %p points inside the block allocated at %#x, not at its start",
            device_, ptr, holder->first)));
      }
    }
    return BadFree(absl::NotFoundError(
        absl::StrFormat("device %d: %p was not allocated by this pool", device_, ptr)));
  }
  Block& block = it->second;
  if (!block.allocated) {
    return BadFree(absl::FailedPreconditionError(
        absl::StrFormat("device %d: double free of %p", device_, ptr)));
  }
  if (bytes != block.requested) {
    return BadFree(absl::InvalidArgumentError(absl::StrFormat(
        "device %d: %p was allocated with %d bytes but freed with %d", device_, ptr,
        block.requested, bytes)));
  }
  if (stream->device() != device_) {
    return BadFree(absl::InvalidArgumentError(absl::StrFormat(
        "device %d: %p freed on a stream of device %d", device_, ptr, stream->device())));
  }
  CountFree(block);
  timeline_.Add(TraceAction::kFreeCompleted, device_, addr, bytes, block.tag, stream);
  AddStream(block.streams, stream);
  block.allocated = false;
  block.requested = 0;
  free_.emplace(block.size, addr);
  Coalesce(it);
  return absl::OkStatus();
}

absl::Status DevicePool::RecordStream(void* ptr, Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.end() || !it->second.allocated) {
    return BadFree(absl::NotFoundError(
        absl::StrFormat("device %d: RecordStream on %p, which is not allocated", device_, ptr)));
  }
  AddStream(it->second.streams, stream);
  return absl::OkStatus();
}

absl::StatusOr<size_t> DevicePool::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  return TrimLocked();
}

absl::StatusOr<size_t> DevicePool::TrimLocked() {
  const size_t g = space_->granularity();
  size_t released = 0;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    const uintptr_t addr = it->first;
    const uintptr_t end = addr + it->second.size;
    const uintptr_t lo = AlignUp(addr, g), hi = AlignDown(end, g);
    if (it->second.allocated || hi <= lo) {
      ++it;
      continue;
    }
    for (Stream* s : it->second.streams) RETURN_IF_ERROR(s->Synchronize());
    RETURN_IF_ERROR(space_->Unmap(device_, lo, hi - lo));
    Block block = std::move(it->second);
    EraseFree(it);
    if (lo > addr) InsertFree(addr, Block{.size = lo - addr, .streams = block.streams});
    if (end > hi) InsertFree(hi, Block{.size = end - hi, .streams = block.streams});
    AddUnmapped(lo, hi - lo);
    stats_.reserved -= hi - lo;
    ++stats_.num_unmaps;
    timeline_.Add(TraceAction::kSegmentUnmap, device_, lo, hi - lo, Tag::kOther, nullptr);
    released += hi - lo;
    it = blocks_.lower_bound(end);
  }
  return released;
}

void DevicePool::AddUnmapped(uintptr_t addr, size_t bytes) {
  auto next = unmapped_.lower_bound(addr);
  if (next != unmapped_.end() && next->first == addr + bytes) {
    bytes += next->second;
    next = unmapped_.erase(next);
  }
  if (next != unmapped_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      prev->second += bytes;
      return;
    }
  }
  unmapped_.emplace(addr, bytes);
}

void DevicePool::TakeUnmapped(uintptr_t addr, size_t bytes) {
  auto it = std::prev(unmapped_.upper_bound(addr));
  const uintptr_t begin = it->first, end = it->first + it->second;
  unmapped_.erase(it);
  if (begin < addr) unmapped_.emplace(begin, addr - begin);
  if (addr + bytes < end) unmapped_.emplace(addr + bytes, end - addr - bytes);
}

absl::Status DevicePool::OutOfMemory(size_t bytes, Tag tag, absl::string_view why) {
  ++stats_.num_ooms;
  timeline_.Add(TraceAction::kOom, device_, 0, bytes, tag, nullptr);
  const size_t largest = free_.empty() ? 0 : free_.rbegin()->first;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "device %d (%s): out of memory allocating %s for %s (%s): %s allocated, %s reserved, "
      "%s free of %s capacity, largest free block %s",
      device_, std::string(DeviceKindName(space_->backend().kind())), FormatBytes(bytes),
      std::string(TagName(tag)), std::string(why), FormatBytes(stats_.allocated),
      FormatBytes(stats_.reserved), FormatBytes(stats_.capacity - stats_.allocated),
      FormatBytes(stats_.capacity), FormatBytes(largest)));
}

absl::Status DevicePool::BadFree(absl::Status status) {
  ++stats_.num_errors;
  return status;
}

void DevicePool::CountAlloc(const Block& block) {
  stats_.allocated += block.size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  stats_.requested += block.requested;
  stats_.peak_requested = std::max(stats_.peak_requested, stats_.requested);
  ++stats_.num_allocs;
  TagStats& t = stats_.tags[static_cast<int>(block.tag)];
  t.current += block.requested;
  t.peak = std::max(t.peak, t.current);
  ++t.live;
  ++t.total;
}

void DevicePool::CountFree(const Block& block) {
  stats_.allocated -= block.size;
  stats_.requested -= block.requested;
  ++stats_.num_frees;
  TagStats& t = stats_.tags[static_cast<int>(block.tag)];
  t.current -= block.requested;
  --t.live;
}

PoolStats DevicePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolStats s = stats_;
  s.cached_free = s.reserved - s.allocated;
  s.largest_free_block = free_.empty() ? 0 : free_.rbegin()->first;
  return s;
}

void DevicePool::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_requested = stats_.requested;
  stats_.peak_reserved = stats_.reserved;
  for (TagStats& t : stats_.tags) t.peak = t.current;
}

}  // namespace zero
