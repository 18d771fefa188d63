#include "memory/pool.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/units.h"

namespace zero {
DevicePool::DevicePool(int device, UvaSpace* space, Stream* default_stream, PoolOptions options)
    : CachingPool(device, space->capacity(device), space->granularity(), options),
      space_(space),
      default_stream_(default_stream),
      slice_begin_(space->slice_begin(device)),
      slice_end_(space->slice_begin(device) + space->slice_size()) {
  unmapped_[slice_begin_] = space->slice_size();
}

DevicePool::~DevicePool() {
  MutexLock lock(mu_);
  SynchronizeAll();
  // Unmap each maximal mapped run in one call.
  const BlockMap& blocks = blocks_.blocks();
  auto it = blocks.begin();
  while (it != blocks.end()) {
    const uintptr_t begin = it->first;
    uintptr_t end = begin;
    while (it != blocks.end() && it->first == end) end = it->first + (it++)->second.size;
    (void)space_->Unmap(device_, begin, end - begin);
  }
}

std::string DevicePool::Name() const { return absl::StrFormat("device %d", device_); }

std::string DevicePool::Describe() const {
  return absl::StrFormat("device %d (%s)", device_,
                         std::string(DeviceKindName(space_->backend().kind())));
}

absl::Status DevicePool::CheckStream(Stream* stream, const char* action) const {
  if (stream->device() == device_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("device %d: %s on a stream of device %d",
                                                    device_, action, stream->device()));
}

absl::Status DevicePool::CheckOwned(void* ptr) const {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  if (addr >= slice_begin_ && addr < slice_end_) return absl::OkStatus();
  std::optional<int> owner = space_->device_of(ptr);
  return absl::NotFoundError(
      owner ? absl::StrFormat("device %d: %p belongs to device %d, not this one", device_, ptr,
                              *owner)
            : absl::StrFormat("device %d: %p is not in the UVA space", device_, ptr));
}

// Picks the cheapest way to make a free block of `size` bytes at `alignment`:
// extend a free block that borders unmapped space, bridge a gap between two
// free blocks, or map a fresh range.
absl::StatusOr<DevicePool::BlockMap::iterator> DevicePool::Grow(size_t size, size_t alignment) {
  const size_t g = space_->granularity();
  // Room to align the block's start within what is mapped.
  const size_t need = size + (alignment > options_.round_to ? alignment - options_.round_to : 0);
  BlockMap& blocks = blocks_.blocks();
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
  if (best_bytes == 0) return absl::ResourceExhaustedError("no room left in the device's slice");
  ASSIGN_OR_RETURN(BlockMap::iterator it, MapFree(best_addr, best_bytes));
  if (it->second.size < need) return absl::InternalError("grown block too small");
  return it;
}

absl::StatusOr<DevicePool::BlockMap::iterator> DevicePool::MapFree(uintptr_t addr,
                                                                   size_t bytes) {
  RETURN_IF_ERROR(space_->Map(device_, addr, bytes));
  TakeUnmapped(addr, bytes);
  return AddMapped(addr, bytes);
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
    RETURN_IF_ERROR(BlockSet::WaitForPending(it->second));
    // A failed unmap still gave back a leading part: book exactly that.
    size_t done = 0;
    const absl::Status unmapped = space_->Unmap(device_, lo, hi - lo, &done);
    if (done > 0) {
      blocks_.EraseFree(it);
      // The pieces left mapped have no pending uses: they were all waited for.
      if (lo > addr) blocks_.InsertFree(addr, Block{.size = lo - addr, .users = {}, .pending = {}});
      if (end > lo + done) {
        blocks_.InsertFree(lo + done, Block{.size = end - lo - done, .users = {}, .pending = {}});
      }
      AddUnmapped(lo, done);
      Released(lo, done);
      released += done;
    }
    RETURN_IF_ERROR(unmapped);
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

}  // namespace zero
