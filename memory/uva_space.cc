#include "memory/uva_space.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/units.h"

namespace zero {

absl::StatusOr<std::unique_ptr<UvaSpace>> UvaSpace::Create(Backend* backend,
                                                           size_t slice_factor) {
  const int n = backend->device_count();
  if (n <= 0) return absl::InvalidArgumentError("a UVA space needs at least one device");
  size_t largest = 0;
  for (int d = 0; d < n; ++d) largest = std::max(largest, backend->capacity(d));
  if (largest == 0) return absl::InvalidArgumentError("devices have zero capacity");
  const size_t slice = AlignUp(largest * slice_factor, backend->granularity());
  absl::StatusOr<uintptr_t> base = backend->Reserve(slice * n);
  if (!base.ok()) return base.status();
  return std::unique_ptr<UvaSpace>(new UvaSpace(backend, *base, slice));
}

UvaSpace::UvaSpace(Backend* backend, uintptr_t base, size_t slice_size)
    : backend_(backend), base_(base), slice_size_(slice_size),
      mapped_(backend->device_count()) {}

UvaSpace::~UvaSpace() {
  // Owners unmap what they mapped; the range goes back whole.
  (void)backend_->Unreserve(base_, slice_size_ * device_count());
}

std::optional<int> UvaSpace::device_of(const void* ptr) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p < base_) return std::nullopt;
  const uintptr_t d = (p - base_) / slice_size_;
  if (d >= static_cast<uintptr_t>(device_count())) return std::nullopt;
  return static_cast<int>(d);
}

absl::Status UvaSpace::CheckRange(int device, uintptr_t addr, size_t bytes) const {
  const size_t g = granularity();
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrFormat("no device %d", device));
  }
  if (bytes == 0 || addr % g != 0 || bytes % g != 0 || addr < slice_begin(device) ||
      addr + bytes > slice_begin(device) + slice_size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "range %#x + %s is not granule-aligned inside device %d's slice", addr,
        FormatBytes(bytes), device));
  }
  return absl::OkStatus();
}

absl::Status UvaSpace::Map(int device, uintptr_t addr, size_t bytes) {
  if (absl::Status s = CheckRange(device, addr, bytes); !s.ok()) return s;
  const size_t capacity = backend_->capacity(device);
  size_t current = mapped_[device].load();
  do {
    if (current + bytes > capacity) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "device %d: mapping %s more would exceed its capacity of %s (%s mapped)", device,
          FormatBytes(bytes), FormatBytes(capacity), FormatBytes(current)));
    }
  } while (!mapped_[device].compare_exchange_weak(current, current + bytes));
  absl::Status status = backend_->Map(device, addr, bytes);
  if (!status.ok()) mapped_[device].fetch_sub(bytes);
  return status;
}

absl::Status UvaSpace::Unmap(int device, uintptr_t addr, size_t bytes) {
  if (absl::Status s = CheckRange(device, addr, bytes); !s.ok()) return s;
  absl::Status status = backend_->Unmap(device, addr, bytes);
  if (status.ok()) mapped_[device].fetch_sub(bytes);
  return status;
}

size_t UvaSpace::mapped_bytes(int device) const { return mapped_[device].load(); }

}  // namespace zero
