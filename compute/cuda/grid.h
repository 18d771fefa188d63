// The launch shape every CUDA kernel of optimizers/ uses: 256 threads a
// block, at most kMaxBlocks blocks, grid-stride loops beyond. The grid
// depends only on the element count, never on the card, so a fixed-order
// reduction over it gives the same bits on every card and rank.
#pragma once

#include <algorithm>
#include <cstddef>

namespace zero::cuda {

inline constexpr unsigned kThreads = 256;
inline constexpr size_t kMaxBlocks = 4096;

// Blocks for `items` work items of one thread each: at least 1.
inline unsigned BlocksFor(size_t items) {
  return static_cast<unsigned>(
      std::clamp<size_t>((items + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

}  // namespace zero::cuda
