// Host buffers that checkpoint files are read into or written from, and
// that the engine's stream copies to or from: pinned (cudaHostAlloc) on
// cards, so those copies run at the link's speed without a host wait; mmap'd
// arenas in huge pages on host devices (offload/host_pool.h). `count`
// buffers of `bytes` each (rounded up to 4 KiB), 4 KiB aligned for O_DIRECT.
// Not thread-safe to create or destroy; the buffers themselves are plain
// memory, used by whoever holds them.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "offload/host_pool.h"

namespace zero::checkpoint {

class PinnedBuffers {
 public:
  // ResourceExhausted when the memory cannot be had (pinning refused).
  static absl::StatusOr<std::unique_ptr<PinnedBuffers>> Create(DeviceSystem& devices,
                                                               size_t count, size_t bytes);
  ~PinnedBuffers();
  PinnedBuffers(const PinnedBuffers&) = delete;
  PinnedBuffers& operator=(const PinnedBuffers&) = delete;

  std::byte* operator[](size_t i) const { return buffers_[i]; }
  size_t count() const { return buffers_.size(); }
  size_t bytes() const { return bytes_; }  // of each

 private:
  PinnedBuffers(std::unique_ptr<PinnedHostPool> pool, size_t bytes)
      : pool_(std::move(pool)), bytes_(bytes) {}

  std::unique_ptr<PinnedHostPool> pool_;
  size_t bytes_;
  std::vector<std::byte*> buffers_;
};

}  // namespace zero::checkpoint
