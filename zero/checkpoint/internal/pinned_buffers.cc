#include "zero/checkpoint/internal/pinned_buffers.h"

#include <algorithm>
#include <utility>

#include "base/direct_file.h"
#include "base/status_macros.h"
#include "memory/tag.h"

namespace zero::checkpoint {

absl::StatusOr<std::unique_ptr<PinnedBuffers>> PinnedBuffers::Create(DeviceSystem& devices,
                                                                     size_t count,
                                                                     size_t bytes) {
  const size_t each = RoundUpToAlignment(bytes == 0 ? 1 : bytes);
  // Arenas of up to 1 GiB (pinning is per arena, and a few large calls cost
  // less than many), each a whole number of buffers: a remainder per arena
  // added up past a buffer, and the last buffer found no room (4 GiB of
  // 12 MiB + 4 KiB buffers).
  const size_t per_arena = std::clamp<size_t>((size_t{1} << 30) / each, 1, std::max<size_t>(count, 1));
  PinnedHostPoolOptions options;
  options.arena_bytes = per_arena * each;
  ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostPool> pool,
                   PinnedHostPool::Create(&devices, std::max<size_t>(count, 1) * each, options));
  std::unique_ptr<PinnedBuffers> out(new PinnedBuffers(std::move(pool), each));
  for (size_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(void* p, out->pool_->Allocate(each, Tag::kOther, nullptr,
                                                   DirectFile::kAlignment));
    out->buffers_.push_back(static_cast<std::byte*>(p));
  }
  return out;
}

PinnedBuffers::~PinnedBuffers() {
  for (std::byte* p : buffers_) (void)pool_->Deallocate(p, bytes_, nullptr);
}

}  // namespace zero::checkpoint
