#include "offload/host_pool.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "memory/status_macros.h"
#include "offload/cuda/cuda_arena_source.h"

namespace zero {
namespace {

constexpr absl::string_view kName = "pinned host pool";

std::unique_ptr<ArenaSource> SourceFor(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCuda: return CreateCudaHostArenaSource();
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
  return Create(SourceFor(system->kind()), capacity_bytes, options);
}

absl::StatusOr<std::unique_ptr<PinnedHostPool>> PinnedHostPool::Create(
    std::unique_ptr<ArenaSource> source, size_t capacity_bytes, Options options) {
  if (source == nullptr) return absl::InvalidArgumentError("pinned host pool: no arena source");
  if (capacity_bytes < source->alignment()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pinned host pool: capacity %s is below one page (%s)", FormatBytes(capacity_bytes),
        FormatBytes(source->alignment())));
  }
  if (!IsPowerOfTwo(options.round_to) || options.round_to > source->alignment() ||
      options.arena_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pinned host pool: round_to (%d) must be a power of two up to %d and arena_bytes > 0",
        options.round_to, source->alignment()));
  }
  return std::unique_ptr<PinnedHostPool>(
      new PinnedHostPool(std::move(source), capacity_bytes, options));
}

PinnedHostPool::PinnedHostPool(std::unique_ptr<ArenaSource> source, size_t capacity,
                               Options options)
    : source_(std::move(source)), capacity_(capacity), options_(options) {
  stats_.device = -1;
  stats_.capacity = capacity;
}

PinnedHostPool::~PinnedHostPool() {
  std::lock_guard<std::mutex> lock(mu_);
  StreamList streams;
  for (const auto& [addr, block] : blocks_.blocks()) MergeStreams(streams, block.streams);
  for (Stream* s : streams) (void)s->Synchronize();
  for (const auto& [segment, arena] : arenas_) {
    source_->Free(reinterpret_cast<void*>(arena.base), arena.bytes);
  }
}

absl::Status PinnedHostPool::CheckRequest(size_t bytes, size_t alignment) const {
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: cannot allocate zero bytes", kName));
  }
  if (!IsPowerOfTwo(alignment) || alignment > source_->alignment()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: alignment %d must be a power of two no larger than %d", kName,
                        alignment, source_->alignment()));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> PinnedHostPool::DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                                 Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status valid = CheckRequest(bytes, alignment); !valid.ok()) {
    ++stats_.num_errors;
    return valid;
  }
  if (bytes > capacity_) return OutOfMemory(bytes, tag, "larger than the whole pool");
  const size_t size = AlignUp(bytes, options_.round_to);
  BlockMap::iterator it = blocks_.FindFit(size, alignment);
  if (it == blocks_.blocks().end()) {
    // Arena bases are aligned to the source's alignment (>= `alignment`), so
    // a fresh arena needs no slack for it.
    absl::StatusOr<BlockMap::iterator> added = AddArena(size);
    if (!added.ok()) {
      if (!absl::IsResourceExhausted(added.status())) return added.status();
      return OutOfMemory(bytes, tag, added.status().message());
    }
    it = *added;
  }
  RETURN_IF_ERROR(BlockSet::OrderAfterUses(it->second, stream));
  it = blocks_.Carve(it, size, alignment);
  it->second.requested = bytes;
  it->second.tag = tag;
  CountAlloc(stats_, it->second.size, bytes, tag);
  return reinterpret_cast<void*>(it->first);
}

// A new arena as one free block of its own segment. When the capacity left
// is too small, arenas with nothing allocated go back first (their room may
// be usable as one larger arena).
absl::StatusOr<PinnedHostPool::BlockMap::iterator> PinnedHostPool::AddArena(size_t need) {
  const size_t align = source_->alignment();
  const size_t want = AlignUp(std::max(need, options_.arena_bytes), align);
  size_t room = AlignDown(capacity_ - stats_.reserved, align);
  if (room < need) {
    ASSIGN_OR_RETURN(size_t released, TrimLocked());
    if (released > 0) room = AlignDown(capacity_ - stats_.reserved, align);
  }
  if (room < need) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "capacity leaves %s for a new arena", FormatBytes(room)));
  }
  const size_t bytes = std::min(want, room);
  ASSIGN_OR_RETURN(void* base, source_->Allocate(bytes));
  const uint32_t segment = next_segment_++;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(base);
  arenas_[segment] = Arena{addr, bytes};
  stats_.reserved += bytes;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  ++stats_.num_maps;
  return blocks_.InsertFree(addr, Block{.size = bytes, .segment = segment, .streams = {}});
}

absl::Status PinnedHostPool::DoDeallocate(void* ptr, size_t bytes, Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<BlockMap::iterator> found =
      blocks_.FindAllocated(reinterpret_cast<uintptr_t>(ptr), bytes);
  if (!found.ok()) {
    ++stats_.num_errors;
    return Annotate(found.status(), kName);
  }
  const Block& block = (*found)->second;
  CountFree(stats_, block.size, block.requested, block.tag);
  blocks_.Free(*found, stream);
  return absl::OkStatus();
}

absl::StatusOr<size_t> PinnedHostPool::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  return TrimLocked();
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
    for (Stream* s : it->second.streams) RETURN_IF_ERROR(s->Synchronize());
    blocks_.EraseFree(it);
    source_->Free(reinterpret_cast<void*>(arena.base), arena.bytes);
    stats_.reserved -= arena.bytes;
    ++stats_.num_unmaps;
    released += arena.bytes;
    a = arenas_.erase(a);
  }
  return released;
}

absl::Status PinnedHostPool::OutOfMemory(size_t bytes, Tag tag, absl::string_view why) {
  ++stats_.num_ooms;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s (%s): out of memory allocating %s for %s (%s): %s allocated, %s reserved in %d "
      "arenas, %s free of %s capacity, largest free block %s",
      kName, std::string(source_->name()), FormatBytes(bytes), std::string(TagName(tag)),
      std::string(why), FormatBytes(stats_.allocated), FormatBytes(stats_.reserved),
      arenas_.size(), FormatBytes(capacity_ - stats_.allocated), FormatBytes(capacity_),
      FormatBytes(blocks_.largest_free())));
}

PoolStats PinnedHostPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Reported(stats_, blocks_.largest_free());
}

void PinnedHostPool::ResetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  zero::ResetPeaks(stats_);
}

}  // namespace zero
