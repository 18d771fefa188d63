// Where PinnedHostPool gets its arenas: the one kind-specific verb of the host
// pool, kept behind this seam so the pool's logic is the same everywhere.
//
// Host devices: page-aligned anonymous mmap. Meta devices: addresses only (no
// bytes, never dereferenced), so footprint experiments can "hold" terabytes.
// Cards: cudaHostAlloc (offload/cuda/). The pool owns its source and calls it
// under its own lock; sources need not be thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zero {

class ArenaSource {
 public:
  virtual ~ArenaSource() = default;

  virtual std::string_view name() const = 0;
  // False on meta: addresses exist, bytes do not.
  virtual bool has_bytes() const = 0;
  // Arena bases are aligned to this and arena sizes are multiples of it.
  virtual size_t alignment() const { return size_t{4096}; }

  // A new arena of `bytes` (a multiple of alignment()). ResourceExhausted when
  // the host cannot give it.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Returns an arena from Allocate; the caller guarantees nothing uses it.
  virtual void Free(void* base, size_t bytes) = 0;
};

std::unique_ptr<ArenaSource> CreateMmapArenaSource();
std::unique_ptr<ArenaSource> CreateMetaArenaSource();

}  // namespace zero
