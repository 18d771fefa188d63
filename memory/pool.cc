#include "memory/pool.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "memory/status_macros.h"
#include "memory/units.h"

namespace zero {
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
  const BlockMap& blocks = blocks_.blocks();
  StreamList streams;
  for (auto& [addr, block] : blocks) MergeStreams(streams, block.streams);
  for (Stream* s : streams) (void)s->Synchronize();
  // Unmap each maximal mapped run in one call.
  auto it = blocks.begin();
  while (it != blocks.end()) {
    const uintptr_t begin = it->first;
    uintptr_t end = begin;
    while (it != blocks.end() && it->first == end) end = it->first + (it++)->second.size;
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
  BlockMap::iterator it = blocks_.FindFit(size, alignment);
  if (it == blocks_.blocks().end()) {
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
  RETURN_IF_ERROR(BlockSet::OrderAfterUses(it->second, stream));
  it = blocks_.Carve(it, size, alignment);
  Block& block = it->second;
  block.requested = bytes;
  block.tag = tag;
  CountAlloc(stats_, block.size, block.requested, block.tag);
  timeline_.Add(TraceAction::kAlloc, device_, it->first, bytes, tag, stream);
  return reinterpret_cast<void*>(it->first);
}

// Picks the cheapest way to make a free block of `need` bytes: extend a free
// block that borders unmapped space, bridge a gap between two free blocks,
// or map a fresh range. Trims and retries once when the device is full.
absl::StatusOr<DevicePool::BlockMap::iterator> DevicePool::Grow(size_t need) {
  const size_t g = space_->granularity();
  BlockMap& blocks = blocks_.blocks();
  for (int attempt = 0;; ++attempt) {
    uintptr_t best_addr = 0;
    size_t best_bytes = 0;
    auto consider = [&](uintptr_t addr, size_t bytes, size_t room) {
      if (bytes == 0 || bytes > room) return;
      if (best_bytes == 0 || bytes < best_bytes) best_addr = addr, best_bytes = bytes;
    };
    for (const auto& [u, len] : unmapped_) {
      size_t before = 0, after = 0;
      auto next = blocks.lower_bound(u);
      if (next != blocks.begin()) {
        auto prev = std::prev(next);
        if (!prev->second.allocated && prev->first + prev->second.size == u) {
          before = prev->second.size;
        }
      }
      if (next != blocks.end() && next->first == u + len && !next->second.allocated) {
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
  return blocks_.Coalesce(blocks_.InsertFree(addr, Block{.size = bytes, .streams = {}}));
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
  absl::StatusOr<BlockMap::iterator> found = blocks_.FindAllocated(addr, bytes);
  if (!found.ok()) {
    return BadFree(Annotate(found.status(), absl::StrFormat("device %d", device_)));
  }
  Block& block = (*found)->second;
  if (stream->device() != device_) {
    return BadFree(absl::InvalidArgumentError(absl::StrFormat(
        "device %d: %p freed on a stream of device %d", device_, ptr, stream->device())));
  }
  CountFree(stats_, block.size, block.requested, block.tag);
  timeline_.Add(TraceAction::kFreeCompleted, device_, addr, bytes, block.tag, stream);
  blocks_.Free(*found, stream);
  return absl::OkStatus();
}

absl::Status DevicePool::RecordStream(void* ptr, Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.blocks().find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.blocks().end() || !it->second.allocated) {
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
  BlockMap& blocks = blocks_.blocks();
  for (auto it = blocks.begin(); it != blocks.end();) {
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
    blocks_.EraseFree(it);
    if (lo > addr) blocks_.InsertFree(addr, Block{.size = lo - addr, .streams = block.streams});
    if (end > hi) blocks_.InsertFree(hi, Block{.size = end - hi, .streams = block.streams});
    AddUnmapped(lo, hi - lo);
    stats_.reserved -= hi - lo;
    ++stats_.num_unmaps;
    timeline_.Add(TraceAction::kSegmentUnmap, device_, lo, hi - lo, Tag::kOther, nullptr);
    released += hi - lo;
    it = blocks.lower_bound(end);
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
  const size_t largest = blocks_.largest_free();
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

PoolStats DevicePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Reported(stats_, blocks_.largest_free());
}

void DevicePool::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  zero::ResetPeaks(stats_);
}

}  // namespace zero
