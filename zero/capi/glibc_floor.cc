// Keeps libzero_engine.so at the glibc 2.34 floor (python/build_wheel.sh
// checks it) although libstdc++ is linked in statically (BUILD says why).
//
// gcc 12's libstdc++.a has std::random_device call arc4random, new in glibc
// 2.36, and the archive pulls that object in through its COW-string
// instantiations even though nothing here uses std::random_device: without
// this definition the library would ask for GLIBC_2.36 and refuse to load
// on glibc 2.34 and 2.35 systems (Ubuntu 22.04, RHEL 9). Defined here, the
// reference binds to this copy at link time; the version script keeps it
// local, so nothing else in the process sees it. getrandom(2) is glibc 2.25.
// Linked into the shared library only, never into a test binary, where it
// would stand in for the system's arc4random.

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t value;
  auto* out = reinterpret_cast<unsigned char*>(&value);
  size_t left = sizeof(value);
  while (left > 0) {
    ssize_t got = getrandom(out, left, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::abort();  // as glibc's own arc4random does when it has no entropy
    }
    out += got;
    left -= static_cast<size_t>(got);
  }
  return value;
}
