// The C++ side of the drop-in allocator (libzero_allocator.so): malloc/free
// by (size, device, native stream) as PyTorch's CUDAPluggableAllocator calls
// them, routed to each device's pool, with an optional byte cap per device,
// error counters, the last error's text and a statistics JSON.
//
// Streams: on cards a native stream is a cudaStream_t (null: CUDA's default
// stream), wrapped once and kept by the DeviceSystem, so the pool's
// stream-ordered reuse sees PyTorch's streams; the caller keeps each stream
// alive while memory used on it may still be reused. Host and meta devices
// have no native streams: only null is accepted, meaning the pool's default.
//
// Every failure is returned as a status and also counted and remembered, for
// callers (the C shim) that can only return null. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "memory/device_system.h"
#include "memory/limiting_adaptor.h"
#include "memory/resource.h"
#include "memory/tag.h"

namespace zero {

struct ExternalAllocatorOptions {
  size_t cap = 0;          // bytes live per device through this allocator; 0: no cap
  std::string stats_path;  // the C shim writes StatsJson() here at exit; empty: nowhere
  Tag tag = Tag::kOther;   // PyTorch does not say what a tensor is for
  // The C shim's zero_malloc throws BadAlloc (a std::bad_alloc carrying the
  // pool's message) on out-of-memory instead of returning null: PyTorch's
  // pluggable allocator keeps a null return unchecked (README.md), but turns
  // an exception into a Python RuntimeError at the allocating call.
  bool throw_on_oom = false;
};

// ZERO_ALLOCATOR_CAP (e.g. "8GiB", parsed by ParseBytes),
// ZERO_ALLOCATOR_STATS (a file path) and ZERO_ALLOCATOR_OOM ("null", the
// default, or "throw"). Unset means no cap, no file, null.
absl::StatusOr<ExternalAllocatorOptions> ExternalAllocatorOptionsFromEnvironment();

enum class ExternalError : int {
  kInvalidSize = 0,  // size <= 0
  kInvalidDevice,    // no such device
  kInvalidStream,    // a native stream the backend cannot use
  kOutOfMemory,      // the pool or the cap said no
  kForeignPointer,   // freed memory this allocator does not own
  kDoubleFree,
  kSizeMismatch,     // freed with another size than allocated
  kOther,
};
inline constexpr int kNumExternalErrors = 8;
inline constexpr std::array<std::string_view, kNumExternalErrors> kExternalErrorNames = {
    "invalid_size",    "invalid_device", "invalid_stream", "out_of_memory",
    "foreign_pointer", "double_free",    "size_mismatch",  "other"};

class ExternalAllocator {
 public:
  // Devices from $ZERO_DEVICES (DeviceSystem::CreateFromEnvironment) and
  // options from the environment; owns the system.
  static absl::StatusOr<std::unique_ptr<ExternalAllocator>> CreateFromEnvironment();
  // Over `system`, which must outlive this allocator.
  ExternalAllocator(DeviceSystem* system, ExternalAllocatorOptions options);
  ExternalAllocator(std::unique_ptr<DeviceSystem> system, ExternalAllocatorOptions options);
  ExternalAllocator(const ExternalAllocator&) = delete;
  ExternalAllocator& operator=(const ExternalAllocator&) = delete;

  // `device` is the caller's number for it (Backend::native_id): the CUDA
  // card number PyTorch passes, which with "cuda:2" is the system's device 0.
  absl::StatusOr<void*> Allocate(int64_t size, int device, void* native_stream);
  // `size`, `device` and `native_stream` as allocated (PyTorch passes the
  // allocation's stream). A null `ptr` is a no-op, as with free().
  absl::Status Deallocate(void* ptr, int64_t size, int device, void* native_stream);
  // `ptr` is used by work on `native_stream` too (CachingPool::RecordStream):
  // its free orders the next owner after that work as well. The device is
  // the one holding `ptr` (torch's record_stream passes none). Null: no-op.
  absl::Status RecordStream(void* ptr, void* native_stream);

  // Counts and remembers a failure, returning it: every failure above goes
  // through here, and so do those the caller finds (the C shim's exceptions).
  absl::Status RecordFailure(ExternalError kind, absl::Status status);

  uint64_t errors(ExternalError kind) const;
  uint64_t total_errors() const;
  std::string last_error() const;  // "" until something fails
  size_t cap_used(int device) const;  // by the system's index; 0 without a cap
  DeviceSystem& system() { return *system_; }
  const ExternalAllocatorOptions& options() const { return options_; }

  // {"kind","cap","errors":{..},"last_error",
  //  "devices":[PoolStatsJson + native_id, cap_used]}
  std::string StatsJson() const;
  absl::Status WriteStats(const std::string& path) const;  // atomically

 private:
  // By the system's index (DeviceOfNativeId of the caller's number).
  MemoryResource* Resource(int device);
  absl::StatusOr<Stream*> StreamFor(int device, void* native_stream);
  std::unique_ptr<DeviceSystem> owned_;
  DeviceSystem* const system_;
  const ExternalAllocatorOptions options_;
  std::vector<std::unique_ptr<LimitingAdaptor>> limits_;  // one per device when capped
  std::array<std::atomic<uint64_t>, kNumExternalErrors> errors_{};
  mutable Mutex last_error_mu_;
  std::string last_error_ ABSL_GUARDED_BY(last_error_mu_);
};

}  // namespace zero
