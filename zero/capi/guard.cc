#include "zero/capi/guard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zero::capi {

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

absl::Status CopyOut(const std::string& text, char* buffer, size_t size, size_t* needed) {
  if (needed != nullptr) *needed = text.size() + 1;
  if (buffer == nullptr || size == 0) return absl::OkStatus();
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
  return absl::OkStatus();
}

}  // namespace zero::capi
