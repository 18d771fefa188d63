#include "memory/interop/external_allocator.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "memory/pool_stats.h"

namespace zero {
namespace {

// Which counter a pool's refusal of a free belongs to (see resource.h).
ExternalError FreeErrorKind(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return ExternalError::kForeignPointer;
    case absl::StatusCode::kFailedPrecondition: return ExternalError::kDoubleFree;
    case absl::StatusCode::kInvalidArgument: return ExternalError::kSizeMismatch;
    default: return ExternalError::kOther;
  }
}

}  // namespace

absl::StatusOr<ExternalAllocatorOptions> ExternalAllocatorOptionsFromEnvironment() {
  ExternalAllocatorOptions options;
  if (const char* cap = std::getenv("ZERO_ALLOCATOR_CAP"); cap != nullptr && *cap != '\0') {
    absl::StatusOr<size_t> bytes = ParseBytes(cap);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ZERO_ALLOCATOR_CAP: ", bytes.status().message()));
    }
    options.cap = *bytes;
  }
  if (const char* path = std::getenv("ZERO_ALLOCATOR_STATS"); path != nullptr) {
    options.stats_path = path;
  }
  if (const char* oom = std::getenv("ZERO_ALLOCATOR_OOM"); oom != nullptr && *oom != '\0') {
    const std::string mode = oom;
    if (mode != "null" && mode != "throw") {
      return absl::InvalidArgumentError(
          absl::StrCat("ZERO_ALLOCATOR_OOM: '", mode, "' is neither 'null' nor 'throw'"));
    }
    options.throw_on_oom = mode == "throw";
  }
  return options;
}

absl::StatusOr<std::unique_ptr<ExternalAllocator>> ExternalAllocator::CreateFromEnvironment() {
  ASSIGN_OR_RETURN(ExternalAllocatorOptions options, ExternalAllocatorOptionsFromEnvironment());
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceSystem> system, DeviceSystem::CreateFromEnvironment());
  return std::make_unique<ExternalAllocator>(std::move(system), std::move(options));
}

ExternalAllocator::ExternalAllocator(std::unique_ptr<DeviceSystem> system,
                                     ExternalAllocatorOptions options)
    : ExternalAllocator(system.get(), std::move(options)) {
  owned_ = std::move(system);
}

ExternalAllocator::ExternalAllocator(DeviceSystem* system, ExternalAllocatorOptions options)
    : system_(system), options_(std::move(options)) {
  if (options_.cap == 0) return;
  for (int d = 0; d < system_->device_count(); ++d) {
    limits_.push_back(std::make_unique<LimitingAdaptor>(&system_->pool(d), options_.cap));
  }
}

MemoryResource* ExternalAllocator::Resource(int device) {
  if (!limits_.empty()) return limits_[device].get();
  return &system_->pool(device);
}

absl::StatusOr<Stream*> ExternalAllocator::StreamFor(int device, void* native_stream) {
  if (system_->kind() == DeviceKind::kCuda) {
    // Null too: PyTorch's default stream is CUDA's, not the pool's own.
    return system_->WrapNativeStream(device, native_stream);
  }
  if (native_stream != nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device %d is a %s device: it has no native streams, pass a null stream", device,
        std::string(DeviceKindName(system_->kind()))));
  }
  return nullptr;  // the pool's default stream
}

absl::Status ExternalAllocator::RecordFailure(ExternalError kind, absl::Status status) {
  errors_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(last_error_mu_);
  last_error_ = status.ToString();
  return status;
}

absl::StatusOr<void*> ExternalAllocator::Allocate(int64_t size, int device, void* native_stream) {
  if (size <= 0) {
    return RecordFailure(ExternalError::kInvalidSize,
                absl::InvalidArgumentError(absl::StrFormat(
                    "device %d: cannot allocate %d bytes (size must be positive)", device, size)));
  }
  const absl::StatusOr<int> index = system_->DeviceOfNativeId(device);
  if (!index.ok()) return RecordFailure(ExternalError::kInvalidDevice, index.status());
  absl::StatusOr<Stream*> stream = StreamFor(*index, native_stream);
  if (!stream.ok()) return RecordFailure(ExternalError::kInvalidStream, stream.status());
  absl::StatusOr<void*> ptr =
      Resource(*index)->Allocate(static_cast<size_t>(size), options_.tag, *stream);
  if (!ptr.ok()) {
    return RecordFailure(absl::IsResourceExhausted(ptr.status()) ? ExternalError::kOutOfMemory
                                                        : ExternalError::kOther,
                ptr.status());
  }
  return ptr;
}

absl::Status ExternalAllocator::Deallocate(void* ptr, int64_t size, int device,
                                           void* native_stream) {
  if (ptr == nullptr) return absl::OkStatus();
  if (size <= 0) {
    return RecordFailure(ExternalError::kInvalidSize,
                absl::InvalidArgumentError(absl::StrFormat(
                    "device %d: free of %p with %d bytes (size must be positive)", device, ptr,
                    size)));
  }
  const absl::StatusOr<int> index = system_->DeviceOfNativeId(device);
  if (!index.ok()) return RecordFailure(ExternalError::kInvalidDevice, index.status());
  absl::StatusOr<Stream*> stream = StreamFor(*index, native_stream);
  if (!stream.ok()) return RecordFailure(ExternalError::kInvalidStream, stream.status());
  absl::Status status = Resource(*index)->Deallocate(ptr, static_cast<size_t>(size), *stream);
  if (!status.ok()) {
    const ExternalError kind = FreeErrorKind(status);  // before `status` is moved
    return RecordFailure(kind, std::move(status));
  }
  return absl::OkStatus();
}

absl::Status ExternalAllocator::RecordStream(void* ptr, void* native_stream) {
  if (ptr == nullptr) return absl::OkStatus();
  const std::optional<int> device = system_->device_of(ptr);
  if (!device.has_value()) {
    return RecordFailure(ExternalError::kForeignPointer,
                         absl::NotFoundError(absl::StrFormat(
                             "record_stream of %p: not memory of any device here", ptr)));
  }
  // A peer card's stream may read this block: its events are made on its
  // own card (an event of the block's card recorded there fails, and the
  // block could never be freed). Null is the current card's default stream.
  int stream_device = *device;
  if (native_stream != nullptr && system_->kind() == DeviceKind::kCuda) {
    absl::StatusOr<int> owner = system_->DeviceOfNativeStream(native_stream);
    if (!owner.ok()) return RecordFailure(ExternalError::kInvalidStream, owner.status());
    stream_device = *owner;
  }
  absl::StatusOr<Stream*> stream = StreamFor(stream_device, native_stream);
  if (!stream.ok()) return RecordFailure(ExternalError::kInvalidStream, stream.status());
  absl::Status status = system_->pool(*device).RecordStream(ptr, *stream);
  if (!status.ok()) {
    const ExternalError kind = FreeErrorKind(status);
    return RecordFailure(kind, std::move(status));
  }
  return absl::OkStatus();
}

uint64_t ExternalAllocator::errors(ExternalError kind) const {
  return errors_[static_cast<int>(kind)].load(std::memory_order_relaxed);
}

uint64_t ExternalAllocator::total_errors() const {
  uint64_t total = 0;
  for (const auto& count : errors_) total += count.load(std::memory_order_relaxed);
  return total;
}

std::string ExternalAllocator::last_error() const {
  MutexLock lock(last_error_mu_);
  return last_error_;
}

size_t ExternalAllocator::cap_used(int device) const {
  if (limits_.empty() || device < 0 || device >= static_cast<int>(limits_.size())) return 0;
  return limits_[device]->used();
}

std::string ExternalAllocator::StatsJson() const {
  std::string out = absl::StrFormat("{\"kind\":\"%s\",\"cap\":%d,\"errors\":{",
                                    std::string(DeviceKindName(system_->kind())), options_.cap);
  for (int e = 0; e < kNumExternalErrors; ++e) {
    absl::StrAppendFormat(&out, "%s\"%s\":%d", e == 0 ? "" : ",",
                          std::string(kExternalErrorNames[e]), errors(static_cast<ExternalError>(e)));
  }
  // Quoted in full: one odd byte in an error text would make a JSON reader
  // reject the whole file, and with it every number in it.
  absl::StrAppend(&out, "},\"last_error\":", json::Quote(last_error()), ",\"devices\":[");
  for (int d = 0; d < system_->device_count(); ++d) {
    std::string pool = PoolStatsJson(system_->pool(d).stats());
    pool.pop_back();  // reopen the object to add this allocator's view
    absl::StrAppendFormat(&out, "%s%s,\"native_id\":%d,\"cap_used\":%d}", d == 0 ? "" : ",",
                          pool, system_->backend().native_id(d), cap_used(d));
  }
  return out + "]}";
}

absl::Status ExternalAllocator::WriteStats(const std::string& path) const {
  return WriteFileAtomically(path, StatsJson() + "\n");
}

}  // namespace zero
