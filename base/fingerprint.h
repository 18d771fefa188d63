// FNV-1a over bytes. Unlike absl::Hash it is the same in every process, so
// ranks on different nodes can compare what they computed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zero {

inline constexpr uint64_t kFnvBasis = 14695981039346656037ull;

inline uint64_t Fnv1a(const void* data, size_t bytes, uint64_t h = kFnvBasis) {
  for (size_t i = 0; i < bytes; ++i) {
    h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ull;
  }
  return h;
}

}  // namespace zero
