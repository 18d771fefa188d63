#include "memory/logging_adaptor.h"

#include <chrono>
#include <functional>
#include <thread>

#include "absl/strings/str_format.h"

namespace zero {

LoggingAdaptor::LoggingAdaptor(MemoryResource* upstream, std::ostream* out)
    : upstream_(upstream), out_(out) {
  MutexLock lock(mu_);
  *out_ << "thread,time_ns,action,pointer,size,tag,stream,status\n";
}

void LoggingAdaptor::Log(const char* action, const void* ptr, size_t bytes,
                         std::string_view tag, const Stream* stream,
                         const absl::Status& status) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const size_t thread = std::hash<std::thread::id>()(std::this_thread::get_id());
  // Quote the status: its message may hold commas.
  std::string line = absl::StrFormat("%x,%d,%s,%p,%d,%s,%p,\"%s\"\n", thread, now, action, ptr,
                                     bytes, std::string(tag), stream,
                                     status.ok() ? "OK" : std::string(status.message()));
  MutexLock lock(mu_);
  *out_ << line;
}

absl::StatusOr<void*> LoggingAdaptor::DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                                 Stream* stream) {
  absl::StatusOr<void*> ptr = upstream_->Allocate(bytes, tag, stream, alignment);
  Log("allocate", ptr.ok() ? *ptr : nullptr, bytes, TagName(tag), stream, ptr.status());
  return ptr;
}

absl::Status LoggingAdaptor::DoDeallocate(void* ptr, size_t bytes, Stream* stream) {
  absl::Status status = upstream_->Deallocate(ptr, bytes, stream);
  Log("free", ptr, bytes, "", stream, status);
  return status;
}

}  // namespace zero
