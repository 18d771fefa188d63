// One virtual address range over every device: device d owns the slice
// [base + d*slice_size, base + (d+1)*slice_size). Slices are larger than
// capacity (virtual space is cheap) so that mapped runs can always find room;
// physical bytes per device are capped at its capacity less a reserve.
//
// Memory is mapped in chunks (one physical allocation each, so trim can give
// any chunk back alone); a run of chunks gets its access granted in one call,
// to the devices of this space only. A mapping that fails at any step is
// undone in full. Pointers never move: the range stays reserved until the
// space is destroyed. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/backend.h"

namespace zero {

struct UvaOptions {
  // The mapping unit: a power of two, at least the backend's granularity.
  // 0 takes the backend's default (64 MiB on cards, a granule elsewhere).
  size_t chunk = 0;
  // Unset: the backend's default (Backend::default_reserve: 2 GiB on cards,
  // none on host and meta devices).
  std::optional<MemoryReserve> reserve;
  // Slices are this many times the largest capacity.
  size_t slice_factor = 2;
};

class UvaSpace {
 public:
  // InvalidArgument for a bad chunk or a reserve that leaves a device less
  // than one chunk.
  static absl::StatusOr<std::unique_ptr<UvaSpace>> Create(Backend* backend,
                                                          const UvaOptions& options = {});
  ~UvaSpace();  // frees the range; its users unmap what they mapped first
  UvaSpace(const UvaSpace&) = delete;
  UvaSpace& operator=(const UvaSpace&) = delete;

  Backend& backend() const { return *backend_; }
  int device_count() const { return backend_->device_count(); }
  // The chunk: every mapped or unmapped range is a whole number of them.
  size_t granularity() const { return chunk_; }
  // Bytes the device may map: its backend capacity less the reserve, in
  // whole chunks.
  size_t capacity(int device) const { return capacity_[device]; }
  size_t slice_size() const { return slice_size_; }
  uintptr_t slice_begin(int device) const { return base_ + device * slice_size_; }

  // Which device's slice holds `ptr`, in constant time; nullopt outside.
  std::optional<int> device_of(const void* ptr) const;

  // Backs [addr, addr+bytes) inside `device`'s slice, chunk-aligned, all or
  // nothing. ResourceExhausted when the device would exceed its capacity.
  absl::Status Map(int device, uintptr_t addr, size_t bytes);
  // Unmaps chunk by chunk in address order and stops at the first failure;
  // `*unmapped` (when given) says how many leading bytes were unmapped.
  absl::Status Unmap(int device, uintptr_t addr, size_t bytes, size_t* unmapped = nullptr);
  size_t mapped_bytes(int device) const;

 private:
  UvaSpace(Backend* backend, uintptr_t reserved, size_t reserved_bytes, uintptr_t base,
           size_t slice_size, size_t chunk, std::vector<size_t> capacity);
  absl::Status CheckRange(int device, uintptr_t addr, size_t bytes) const;
  // Map's steps; on failure undoes them and adds to `*stuck` what it could
  // not unmap.
  absl::Status MapRun(int device, uintptr_t addr, size_t bytes, size_t* stuck);
  // Unmaps the chunks of [addr, addr+bytes) while they succeed; returns the
  // bytes done and the first error.
  size_t UnmapChunks(uintptr_t addr, size_t bytes, absl::Status* status);

  Backend* const backend_;
  const uintptr_t reserved_;  // what Reserve returned, and how much
  const size_t reserved_bytes_;
  const uintptr_t base_;  // chunk-aligned
  const size_t slice_size_;
  const size_t chunk_;
  const std::vector<size_t> capacity_;
  const std::vector<int> access_;  // every device of the space
  std::vector<std::atomic<size_t>> mapped_;
};

}  // namespace zero
