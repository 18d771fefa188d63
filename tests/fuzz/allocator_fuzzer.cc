// The drop-in allocator's C ABI (memory/interop/zero_allocator.h) driven by
// a byte stream of calls: allocate (any size, device, stream), free, free
// with the wrong size, device or stream, free a foreign or interior pointer,
// free twice, read the statistics. Live blocks are filled with a pattern
// checked at their free, so two blocks that overlap fail the run; at the end
// of each input everything is freed and the statistics must be valid JSON.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/json.h"
#include "memory/interop/zero_allocator.h"

namespace {

struct Live {
  unsigned char* ptr;
  ssize_t size;
  int device;
  unsigned char pattern;
};

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t Next() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t Next24() { return Next() | Next() << 8 | uint32_t{Next()} << 16; }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

void Fill(const Live& b) {
  // Both ends and every 64 KiB between: a block that overlaps another by a
  // page or more overwrites one of these.
  for (ssize_t i = 0; i < b.size; i += 65536) b.ptr[i] = b.pattern;
  b.ptr[b.size - 1] = b.pattern;
}

void Check(const Live& b) {
  for (ssize_t i = 0; i < b.size; i += 65536) {
    if (b.ptr[i] != b.pattern) std::abort();  // another block overlaps this one
  }
  if (b.ptr[b.size - 1] != b.pattern) std::abort();
}

void Free(std::vector<Live>& live, size_t index) {
  const Live b = live[index];
  Check(b);
  live.erase(live.begin() + index);
  zero_free(b.ptr, b.size, b.device, nullptr);
}

void CheckStats() {
  char* json = zero_stats_json();
  if (json == nullptr) std::abort();
  if (!zero::json::Parse(json).ok()) std::abort();
  std::free(json);
}

// A size that is mostly small, sometimes large, sometimes absurd.
ssize_t SizeFrom(Bytes& in) {
  const uint8_t kind = in.Next();
  const ssize_t raw = in.Next24();
  switch (kind % 8) {
    case 0: return -raw;                     // negative or zero
    case 1: return raw << 8;                 // up to 4 GiB: over capacity
    case 2: return ssize_t{1} << (raw % 63);  // any power of two
    default: return raw % 65536 + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("ZERO_DEVICES", "host:2x64MiB", 1);
  setenv("ZERO_ALLOCATOR_CAP", "40MiB", 1);
  unsetenv("ZERO_ALLOCATOR_STATS");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  std::vector<Live> live;
  auto pick = [&] { return static_cast<size_t>(in.Next()) % live.size(); };
  for (int op = 0; !in.empty() && op < 256; ++op) {
    switch (in.Next() % 8) {
      case 0:
      case 1: {  // allocate on device 0, 1 or one that does not exist
        const ssize_t bytes = SizeFrom(in);
        const int device = static_cast<int>(in.Next() % 4) - 1;
        const bool bad_stream = in.Next() % 16 == 0;
        auto stream = bad_stream ? reinterpret_cast<zero_stream_t>(uintptr_t{0x10}) : nullptr;
        auto* ptr = static_cast<unsigned char*>(zero_malloc(bytes, device, stream));
        if (ptr == nullptr) break;
        if (bytes <= 0 || device < 0 || device > 1 || bad_stream) std::abort();
        live.push_back({ptr, bytes, device, static_cast<unsigned char>(op)});
        Fill(live.back());
        break;
      }
      case 2:
        if (!live.empty()) Free(live, pick());
        break;
      case 3: {  // wrong size, device or stream: ignored, counted
        if (live.empty()) break;
        const Live& b = live[pick()];
        const uint8_t how = in.Next();
        if (how % 3 == 0) zero_free(b.ptr, b.size + 1 + how, b.device, nullptr);
        if (how % 3 == 1) zero_free(b.ptr, b.size, 1 - b.device, nullptr);
        if (how % 3 == 2) zero_free(b.ptr, b.size, b.device, reinterpret_cast<zero_stream_t>(8));
        break;
      }
      case 4: {  // foreign: the heap, the stack, inside a live block
        int on_stack = 0;
        void* heap = std::malloc(64);
        zero_free(heap, 64, 0, nullptr);
        zero_free(&on_stack, sizeof on_stack, 0, nullptr);
        std::free(heap);
        if (!live.empty()) {
          const Live& b = live[pick()];
          if (b.size > 1) zero_free(b.ptr + b.size / 2, b.size / 2, b.device, nullptr);
        }
        break;
      }
      case 5: {  // freed twice, before anything can reuse the address
        if (live.empty()) break;
        const size_t index = pick();
        const Live b = live[index];
        Free(live, index);
        zero_free(b.ptr, b.size, b.device, nullptr);
        break;
      }
      case 6:
        CheckStats();
        break;
      case 7: {  // record_stream: a live block, its interior, the stack; then the error text
        int on_stack = 0;
        if (!live.empty()) {
          const Live& b = live[pick()];
          zero_record_stream(b.ptr, nullptr);
          if (b.size > 1) zero_record_stream(b.ptr + b.size / 2, nullptr);
        }
        zero_record_stream(&on_stack, nullptr);
        (void)zero_last_error();
        break;
      }
    }
  }
  while (!live.empty()) Free(live, live.size() - 1);
  CheckStats();
  return 0;
}
