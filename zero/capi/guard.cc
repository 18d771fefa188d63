#include "zero/capi/guard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero::capi {
namespace {

// zero_status is absl::StatusCode: Return passes the code through.
constexpr bool SameCode(zero_status ours, absl::StatusCode absl_code) {
  return static_cast<int>(ours) == static_cast<int>(absl_code);
}
static_assert(SameCode(ZERO_OK, absl::StatusCode::kOk) &&
              SameCode(ZERO_CANCELLED, absl::StatusCode::kCancelled) &&
              SameCode(ZERO_UNKNOWN, absl::StatusCode::kUnknown) &&
              SameCode(ZERO_INVALID_ARGUMENT, absl::StatusCode::kInvalidArgument) &&
              SameCode(ZERO_DEADLINE_EXCEEDED, absl::StatusCode::kDeadlineExceeded) &&
              SameCode(ZERO_NOT_FOUND, absl::StatusCode::kNotFound) &&
              SameCode(ZERO_ALREADY_EXISTS, absl::StatusCode::kAlreadyExists) &&
              SameCode(ZERO_PERMISSION_DENIED, absl::StatusCode::kPermissionDenied) &&
              SameCode(ZERO_RESOURCE_EXHAUSTED, absl::StatusCode::kResourceExhausted) &&
              SameCode(ZERO_FAILED_PRECONDITION, absl::StatusCode::kFailedPrecondition) &&
              SameCode(ZERO_ABORTED, absl::StatusCode::kAborted) &&
              SameCode(ZERO_OUT_OF_RANGE, absl::StatusCode::kOutOfRange) &&
              SameCode(ZERO_UNIMPLEMENTED, absl::StatusCode::kUnimplemented) &&
              SameCode(ZERO_INTERNAL, absl::StatusCode::kInternal) &&
              SameCode(ZERO_UNAVAILABLE, absl::StatusCode::kUnavailable) &&
              SameCode(ZERO_DATA_LOSS, absl::StatusCode::kDataLoss) &&
              SameCode(ZERO_UNAUTHENTICATED, absl::StatusCode::kUnauthenticated));

}  // namespace

std::string& LastError() {
  thread_local std::string text;
  return text;
}

int Return(const absl::Status& status) {
  if (status.ok()) return 0;
  LastError() = status.ToString();
  return static_cast<int>(status.code());
}

absl::Status Required(const void* p, absl::string_view what) {
  if (p != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " is null"));
}

absl::StatusOr<DevicePool*> PoolOf(zero_devices_t devices, int device) {
  RETURN_IF_ERROR(Required(devices, "devices"));
  if (device < 0 || device >= devices->system->device_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device %d of %d", device, devices->system->device_count()));
  }
  return &devices->system->pool(device);
}

absl::Status CheckStructSize(absl::string_view what, size_t given, size_t expected) {
  if (given == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s.size is %d, but this library's %s is %d bytes (ABI %d.%d): the caller was built "
      "against another zero_engine.h, or did not set size to sizeof(%s)",
      what, given, what, expected, ZERO_ABI_VERSION_MAJOR, ZERO_ABI_VERSION_MINOR, what));
}

absl::Status CopyOut(const std::string& text, char* buffer, size_t size, size_t* needed) {
  if (needed != nullptr) *needed = text.size() + 1;
  if (buffer == nullptr || size == 0) return absl::OkStatus();
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
  return absl::OkStatus();
}

}  // namespace zero::capi
