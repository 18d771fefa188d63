// Loads libzero_allocator.so the way PyTorch does (dlopen, then the symbols by
// name), allocates, frees, leaves one allocation live and exits, so the
// library's exit handler writes $ZERO_ALLOCATOR_STATS. With
// ZERO_ALLOCATOR_OOM=throw it also asks for more than a device holds and
// expects a std::bad_alloc to reach it from inside the library, as it would
// reach PyTorch (exit 9 if none does). Used by stats_at_exit_test.
// Usage: load_library /path/to/libzero_allocator.so
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace {

using MallocFn = void* (*)(ssize_t, int, void*);
using FreeFn = void (*)(void*, ssize_t, int, void*);

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  Fn fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) std::fprintf(stderr, "missing symbol %s\n", name);
  return fn;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  auto zero_malloc = Symbol<MallocFn>(library, "zero_malloc");
  auto zero_free = Symbol<FreeFn>(library, "zero_free");
  auto zero_stats_json = Symbol<char* (*)()>(library, "zero_stats_json");
  if (zero_malloc == nullptr || zero_free == nullptr || zero_stats_json == nullptr) return 4;
  if (dlsym(library, "_ZN4zero17ExternalAllocator8AllocateEliPv") != nullptr) {
    std::fprintf(stderr, "C++ symbols leak out of the library\n");
    return 5;
  }

  char* bytes = static_cast<char*>(zero_malloc(1 << 20, 1, nullptr));
  if (bytes == nullptr) return 6;
  std::memset(bytes, 7, 1 << 20);
  zero_free(bytes, 1 << 20, 1, nullptr);
  if (zero_malloc(0, 0, nullptr) != nullptr) return 7;
  if (zero_malloc(4096, 1, nullptr) == nullptr) return 8;  // live at exit
  if (const char* oom = std::getenv("ZERO_ALLOCATOR_OOM"); oom != nullptr &&
                                                          std::string_view(oom) == "throw") {
    try {
      (void)zero_malloc(ssize_t{1} << 40, 0, nullptr);
      return 9;
    } catch (const std::bad_alloc& e) {
      std::printf("caught: %s\n", e.what());
    }
  }
  char* json = zero_stats_json();
  std::printf("%s\n", json);
  std::free(json);
  return 0;  // the exit handler writes the file now
}
