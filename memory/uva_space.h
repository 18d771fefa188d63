// One virtual address range over every device: device d owns the slice
// [base + d*slice_size, base + (d+1)*slice_size). Slices are larger than
// capacity (virtual space is cheap) so that mapped runs can always find room;
// physical bytes per device are capped at the device's capacity.
//
// Pointers never move: granules are mapped and unmapped inside the range,
// which itself stays reserved until the space is destroyed. Thread-safe.
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

class UvaSpace {
 public:
  // Slices are `slice_factor` times the largest capacity, rounded to granules.
  static absl::StatusOr<std::unique_ptr<UvaSpace>> Create(Backend* backend,
                                                          size_t slice_factor = 2);
  ~UvaSpace();  // frees the range; its users unmap what they mapped first
  UvaSpace(const UvaSpace&) = delete;
  UvaSpace& operator=(const UvaSpace&) = delete;

  Backend& backend() const { return *backend_; }
  int device_count() const { return backend_->device_count(); }
  size_t granularity() const { return backend_->granularity(); }
  size_t slice_size() const { return slice_size_; }
  uintptr_t slice_begin(int device) const { return base_ + device * slice_size_; }

  // Which device's slice holds `ptr`, in constant time; nullopt outside.
  std::optional<int> device_of(const void* ptr) const;

  // Backs [addr, addr+bytes) inside `device`'s slice; granule-aligned.
  // ResourceExhausted when the device would exceed its capacity.
  absl::Status Map(int device, uintptr_t addr, size_t bytes);
  absl::Status Unmap(int device, uintptr_t addr, size_t bytes);
  size_t mapped_bytes(int device) const;

 private:
  UvaSpace(Backend* backend, uintptr_t base, size_t slice_size);
  absl::Status CheckRange(int device, uintptr_t addr, size_t bytes) const;

  Backend* const backend_;
  const uintptr_t base_;
  const size_t slice_size_;
  std::vector<std::atomic<size_t>> mapped_;
};

}  // namespace zero
