#include "memory/uva_space.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/units.h"

namespace zero {
namespace {

absl::StatusOr<size_t> ChunkFor(const Backend& backend, size_t requested) {
  const size_t g = backend.granularity();
  const size_t chunk = requested == 0 ? std::max(backend.default_chunk(), g) : requested;
  if (!IsPowerOfTwo(chunk) || chunk < g) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mapping chunk %s: must be a power of two of at least the %s granularity of %s devices",
        FormatBytes(chunk), FormatBytes(g), std::string(DeviceKindName(backend.kind()))));
  }
  return chunk;
}

absl::StatusOr<size_t> UsableCapacity(const Backend& backend, int device,
                                      const MemoryReserve& reserve, size_t chunk) {
  if (reserve.fraction < 0 || reserve.fraction >= 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reserve fraction %g: must be in [0, 1)", reserve.fraction));
  }
  const size_t capacity = backend.capacity(device);
  const size_t kept =
      reserve.bytes + static_cast<size_t>(reserve.fraction * static_cast<double>(capacity));
  const size_t usable = kept < capacity ? AlignDown(capacity - kept, chunk) : 0;
  if (usable == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d: its capacity of %s less a reserve of %s leaves less than one %s chunk",
        device, FormatBytes(capacity), FormatBytes(kept), FormatBytes(chunk)));
  }
  return usable;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UvaSpace>> UvaSpace::Create(Backend* backend,
                                                           const UvaOptions& options) {
  const int n = backend->device_count();
  if (n <= 0) return absl::InvalidArgumentError("a UVA space needs at least one device");
  ASSIGN_OR_RETURN(const size_t chunk, ChunkFor(*backend, options.chunk));
  std::vector<size_t> capacity;
  for (int d = 0; d < n; ++d) {
    ASSIGN_OR_RETURN(size_t usable,
                     UsableCapacity(*backend, d,
                                    options.reserve.value_or(backend->default_reserve()), chunk));
    capacity.push_back(usable);
  }
  const size_t largest = *std::max_element(capacity.begin(), capacity.end());
  const size_t factor = std::max<size_t>(options.slice_factor, 1);
  // One chunk more than the slices, so that they can start chunk-aligned.
  // Checked: a product that wrapped reserved a few bytes and laid device
  // slices over each other (two devices handing out the same addresses).
  size_t slice = 0, reserved_bytes = 0;
  if (__builtin_mul_overflow(largest, factor, &slice) || slice > SIZE_MAX - chunk ||
      __builtin_mul_overflow(AlignUp(slice, chunk), static_cast<size_t>(n), &reserved_bytes) ||
      __builtin_add_overflow(reserved_bytes, chunk, &reserved_bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d devices of %s (slice factor %d) need more address space than 64 bits hold", n,
        FormatBytes(largest), factor));
  }
  slice = AlignUp(slice, chunk);
  ASSIGN_OR_RETURN(const uintptr_t reserved, backend->Reserve(reserved_bytes));
  return std::unique_ptr<UvaSpace>(new UvaSpace(backend, reserved, reserved_bytes,
                                                AlignUp(reserved, chunk), slice, chunk,
                                                std::move(capacity)));
}

UvaSpace::UvaSpace(Backend* backend, uintptr_t reserved, size_t reserved_bytes, uintptr_t base,
                   size_t slice_size, size_t chunk, std::vector<size_t> capacity)
    : backend_(backend),
      reserved_(reserved),
      reserved_bytes_(reserved_bytes),
      base_(base),
      slice_size_(slice_size),
      chunk_(chunk),
      capacity_(std::move(capacity)),
      access_([n = backend->device_count()] {
        std::vector<int> all(n);
        std::iota(all.begin(), all.end(), 0);
        return all;
      }()),
      mapped_(backend->device_count()) {}

UvaSpace::~UvaSpace() {
  // Owners unmap what they mapped; the range goes back whole.
  (void)backend_->Unreserve(reserved_, reserved_bytes_);
}

std::optional<int> UvaSpace::device_of(const void* ptr) const {
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p < base_) return std::nullopt;
  const uintptr_t d = (p - base_) / slice_size_;
  if (d >= static_cast<uintptr_t>(device_count())) return std::nullopt;
  return static_cast<int>(d);
}

absl::Status UvaSpace::CheckRange(int device, uintptr_t addr, size_t bytes) const {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(absl::StrFormat("no device %d", device));
  }
  if (bytes == 0 || addr % chunk_ != 0 || bytes % chunk_ != 0 || addr < slice_begin(device) ||
      addr + bytes > slice_begin(device) + slice_size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "range %#x + %s is not %s-chunk-aligned inside device %d's slice", addr,
        FormatBytes(bytes), FormatBytes(chunk_), device));
  }
  return absl::OkStatus();
}

absl::Status UvaSpace::Map(int device, uintptr_t addr, size_t bytes) {
  RETURN_IF_ERROR(CheckRange(device, addr, bytes));
  const size_t capacity = capacity_[device];
  size_t current = mapped_[device].load();
  do {
    if (current + bytes > capacity) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "device %d: mapping %s more would exceed its capacity of %s (%s mapped)", device,
          FormatBytes(bytes), FormatBytes(capacity), FormatBytes(current)));
    }
  } while (!mapped_[device].compare_exchange_weak(current, current + bytes));
  size_t stuck = 0;
  absl::Status status = MapRun(device, addr, bytes, &stuck);
  if (!status.ok()) mapped_[device].fetch_sub(bytes - stuck);
  return status;
}

absl::Status UvaSpace::MapRun(int device, uintptr_t addr, size_t bytes, size_t* stuck) {
  std::vector<PhysicalHandle> handles;
  size_t mapped = 0;
  absl::Status status;
  for (; mapped < bytes; mapped += chunk_) {
    absl::StatusOr<PhysicalHandle> handle = backend_->CreatePhysical(device, chunk_);
    if (!handle.ok()) {
      status = handle.status();
      break;
    }
    handles.push_back(*handle);
    status = backend_->MapPhysical(addr + mapped, chunk_, *handle);
    if (!status.ok()) break;
  }
  if (status.ok()) status = backend_->SetAccess(addr, bytes, access_);
  // Mapped or not, the handles are not needed again: a mapping holds its
  // memory, and an unmapped one is freed by its release.
  for (PhysicalHandle handle : handles) {
    absl::Status released = backend_->ReleasePhysical(handle);
    if (status.ok()) status = released;
  }
  if (status.ok()) return status;
  const std::string what = absl::StrFormat("device %d: mapping %s at %#x", device,
                                           FormatBytes(bytes), addr);
  absl::Status undo;
  *stuck = mapped - UnmapChunks(addr, mapped, &undo);
  if (!undo.ok()) {
    return Annotate(status, absl::StrFormat("%s (undoing it left %s mapped: %s)", what,
                                            FormatBytes(*stuck), undo.message()));
  }
  return Annotate(status, what);
}

size_t UvaSpace::UnmapChunks(uintptr_t addr, size_t bytes, absl::Status* status) {
  size_t done = 0;
  for (; done < bytes; done += chunk_) {
    *status = backend_->UnmapPhysical(addr + done, chunk_);
    if (!status->ok()) break;
  }
  return done;
}

absl::Status UvaSpace::Unmap(int device, uintptr_t addr, size_t bytes, size_t* unmapped) {
  if (unmapped != nullptr) *unmapped = 0;
  RETURN_IF_ERROR(CheckRange(device, addr, bytes));
  absl::Status status;
  const size_t done = UnmapChunks(addr, bytes, &status);
  mapped_[device].fetch_sub(done);
  if (unmapped != nullptr) *unmapped = done;
  return Annotate(status, absl::StrFormat("device %d: unmapping %s at %#x (%s of it done)",
                                          device, FormatBytes(bytes), addr, FormatBytes(done)));
}

size_t UvaSpace::mapped_bytes(int device) const { return mapped_[device].load(); }

}  // namespace zero
