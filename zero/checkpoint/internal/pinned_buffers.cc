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
  // One arena when it fits in 1 GiB: pinning is per arena, and a few large
  // calls cost less than many.
  PinnedHostPoolOptions options;
  options.arena_bytes = std::max(each, std::min(count * each, size_t{1} << 30));
  ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostPool> pool,
                   PinnedHostPool::Create(&devices, count * each + each, options));
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
