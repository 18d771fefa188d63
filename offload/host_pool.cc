#include "offload/host_pool.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "offload/cuda/cuda_arena_source.h"

namespace zero {
namespace {

constexpr absl::string_view kName = "pinned host pool";

std::unique_ptr<ArenaSource> SourceFor(DeviceSystem& system) {
  switch (system.kind()) {
    case DeviceKind::kCuda: return CreateCudaHostArenaSource(system.backend().native_id(0));
    case DeviceKind::kHost: return CreateMmapArenaSource();
    case DeviceKind::kMeta: return CreateMetaArenaSource();
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PinnedHostPool>> PinnedHostPool::Create(DeviceSystem* system,
                                                                       size_t capacity_bytes,
                                                                       Options options) {
  if (system == nullptr) return absl::InvalidArgumentError("pinned host pool: no device system");
  return Create(SourceFor(*system), capacity_bytes, options);
}

absl::StatusOr<std::unique_ptr<PinnedHostPool>> PinnedHostPool::Create(
    std::unique_ptr<ArenaSource> source, size_t capacity_bytes, Options options) {
  if (source == nullptr) return absl::InvalidArgumentError("pinned host pool: no arena source");
  if (capacity_bytes < source->alignment()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pinned host pool: capacity %s is below one page (%s)", FormatBytes(capacity_bytes),
        FormatBytes(source->alignment())));
  }
  RETURN_IF_ERROR(CheckOptions({.round_to = options.round_to}, source->alignment(),
                               "pinned host pool"));
  if (options.arena_bytes == 0) {
    return absl::InvalidArgumentError("pinned host pool: arena_bytes is 0");
  }
  return std::unique_ptr<PinnedHostPool>(
      new PinnedHostPool(std::move(source), capacity_bytes, options));
}

PinnedHostPool::PinnedHostPool(std::unique_ptr<ArenaSource> source, size_t capacity,
                               Options options)
    : CachingPool(/*device=*/-1, capacity, source->alignment(),
                  {.round_to = options.round_to, .timeline_limit = options.timeline_limit}),
      source_(std::move(source)),
      arena_bytes_(options.arena_bytes) {}

PinnedHostPool::~PinnedHostPool() {
  MutexLock lock(mu_);
  SynchronizeAll();
  for (const auto& [segment, arena] : arenas_) {
    source_->Free(reinterpret_cast<void*>(arena.base), arena.bytes);
  }
}

std::string PinnedHostPool::Name() const { return std::string(kName); }

std::string PinnedHostPool::Describe() const {
  return absl::StrFormat("%s (%s)", kName, std::string(source_->name()));
}

std::string PinnedHostPool::ReservedDetail() const {
  return absl::StrFormat(" in %d arenas", arenas_.size());
}

// A new arena as one free block of its own segment. Arena bases are aligned
// to the source's alignment (>= any request's), so `size` needs no slack.
absl::StatusOr<PinnedHostPool::BlockMap::iterator> PinnedHostPool::Grow(size_t size,
                                                                       size_t /*alignment*/) {
  const size_t align = source_->alignment();
  const size_t room = AlignDown(capacity_ - stats_.reserved, align);
  if (room < size) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "capacity leaves %s for a new arena", FormatBytes(room)));
  }
  const size_t bytes = std::min(AlignUp(std::max(size, arena_bytes_), align), room);
  ASSIGN_OR_RETURN(void* base, source_->Allocate(bytes));
  const uint32_t segment = next_segment_++;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(base);
  arenas_[segment] = Arena{addr, bytes};
  return AddMapped(addr, bytes, segment);
}

// Free blocks coalesce within their arena, so a wholly free arena is exactly
// one free block at its base spanning it.
absl::StatusOr<size_t> PinnedHostPool::TrimLocked() {
  size_t released = 0;
  BlockMap& blocks = blocks_.blocks();
  for (auto a = arenas_.begin(); a != arenas_.end();) {
    const Arena arena = a->second;
    auto it = blocks.find(arena.base);
    if (it == blocks.end() || it->second.allocated || it->second.size != arena.bytes) {
      ++a;
      continue;
    }
    RETURN_IF_ERROR(BlockSet::WaitForPending(it->second));
    blocks_.EraseFree(it);
    source_->Free(reinterpret_cast<void*>(arena.base), arena.bytes);
    Released(arena.base, arena.bytes);
    released += arena.bytes;
    a = arenas_.erase(a);
  }
  return released;
}

}  // namespace zero
