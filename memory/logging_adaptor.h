// Logs every call through to `upstream` as CSV, like RMM's
// logging_resource_adaptor: thread,time_ns,action,pointer,size,tag,stream,status.
// Failed calls are logged too. Thread-safe; does not own `upstream` or `out`.
#pragma once

#include <ostream>

#include "base/mutex.h"
#include "memory/resource.h"

namespace zero {

class LoggingAdaptor final : public MemoryResource {
 public:
  // Writes the CSV header to `out` at once.
  LoggingAdaptor(MemoryResource* upstream, std::ostream* out);

 protected:
  absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                   Stream* stream) override;
  absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) override;

 private:
  void Log(const char* action, const void* ptr, size_t bytes, std::string_view tag,
           const Stream* stream, const absl::Status& status);

  MemoryResource* const upstream_;
  Mutex mu_;
  std::ostream* const out_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace zero
