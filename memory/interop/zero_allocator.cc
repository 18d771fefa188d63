// The C shim of libzero_allocator.so: one process-wide ExternalAllocator,
// created on first use, and four functions that never let an exception or a
// status cross the C boundary.
#include "memory/interop/zero_allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "memory/interop/bad_alloc.h"
#include "memory/interop/external_allocator.h"

namespace zero {
namespace {

struct Global {
  ExternalAllocator* allocator = nullptr;  // null when creation failed
  std::string error;                       // why it failed
};

const Global& GetGlobal();

void WriteStatsAtExit() {
  ExternalAllocator* allocator = GetGlobal().allocator;
  absl::Status status = allocator->WriteStats(allocator->options().stats_path);
  if (!status.ok()) {
    std::fprintf(stderr, "zero_allocator: cannot write statistics: %s\n",
                 status.ToString().c_str());
  }
}

// No device guard here: every CUDA call below (the cuda backend's start,
// each CudaStream call) makes its card current and restores the caller's
// context itself (memory/cuda/current_device.h). A guard of cudaGetDevice /
// cudaSetDevice would do harm: on a thread with no context (a garbage
// collector freeing a tensor) cudaGetDevice says 0, and setting 0 back
// creates card 0's context in every process.
Global Create() {
  Global global;
  absl::StatusOr<std::unique_ptr<ExternalAllocator>> created =
      ExternalAllocator::CreateFromEnvironment();
  if (!created.ok()) {
    // Said once on stderr too: PyTorch only reports an out-of-memory error.
    global.error = absl::StrCat("zero_allocator: ", created.status().ToString());
    std::fprintf(stderr, "%s\n", global.error.c_str());
    return global;
  }
  // Never deleted: PyTorch frees tensors during and after exit handlers, and
  // a card's runtime may be gone by the time static destructors would run.
  global.allocator = created->release();
  if (!global.allocator->options().stats_path.empty()) std::atexit(WriteStatsAtExit);
  return global;
}

const Global& GetGlobal() {
  // Never destroyed: the stats hook Create registers with atexit would
  // otherwise run after the destructor of a static it reads.
  static const Global* const global = new Global(Create());  // thread-safe, once
  return *global;
}

// Runs `body` against the allocator; an exception (host memory exhausted in
// the pool's bookkeeping) becomes a counted failure and `on_error`.
template <typename T, typename Body>
T Guarded(T on_error, Body body) noexcept {
  ExternalAllocator* allocator = nullptr;
  try {
    allocator = GetGlobal().allocator;
    if (allocator == nullptr) return on_error;
    return body(*allocator);
  } catch (const std::exception& e) {
    if (allocator != nullptr) {
      (void)allocator->RecordFailure(ExternalError::kOther, absl::InternalError(e.what()));
    }
  } catch (...) {
  }
  return on_error;
}

}  // namespace
}  // namespace zero

extern "C" {

void* zero_malloc(ssize_t size, int device, zero_stream_t stream) {
  absl::Status out_of_memory;
  void* ptr = zero::Guarded<void*>(nullptr, [&](zero::ExternalAllocator& allocator) -> void* {
    absl::StatusOr<void*> ptr = allocator.Allocate(size, device, stream);
    if (ptr.ok()) return *ptr;
    if (allocator.options().throw_on_oom && absl::IsResourceExhausted(ptr.status())) {
      out_of_memory = ptr.status();
    }
    return nullptr;
  });
  // Outside Guarded, which would catch it.
  if (!out_of_memory.ok()) throw zero::BadAlloc(std::move(out_of_memory));
  return ptr;
}

void zero_free(void* ptr, ssize_t size, int device, zero_stream_t stream) {
  zero::Guarded<bool>(false, [&](zero::ExternalAllocator& allocator) {
    return allocator.Deallocate(ptr, size, device, stream).ok();
  });
}

void zero_record_stream(void* ptr, zero_stream_t stream) {
  zero::Guarded<bool>(false, [&](zero::ExternalAllocator& allocator) {
    return allocator.RecordStream(ptr, stream).ok();
  });
}

const char* zero_last_error(void) {
  thread_local std::string text;
  try {
    const zero::Global& global = zero::GetGlobal();
    text = global.allocator != nullptr ? global.allocator->last_error() : global.error;
  } catch (...) {
    text.clear();  // never allocates
  }
  return text.c_str();
}

char* zero_stats_json(void) {
  try {
    const zero::Global& global = zero::GetGlobal();
    const std::string json =
        global.allocator != nullptr
            ? global.allocator->StatsJson()
            : absl::StrCat("{\"error\":", zero::json::Quote(global.error), "}");
    char* out = static_cast<char*>(std::malloc(json.size() + 1));
    if (out != nullptr) std::memcpy(out, json.c_str(), json.size() + 1);
    return out;
  } catch (...) {
    return nullptr;
  }
}

}  // extern "C"
