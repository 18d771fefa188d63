// Pinned host arenas on machines with cards: cudaHostAlloc (portable, so every
// card's copy engine can DMA from them at full speed). Compiled everywhere,
// called only when the DeviceSystem's backend is cuda.
#pragma once

#include <memory>

#include "offload/internal/arena_source.h"

namespace zero {

std::unique_ptr<ArenaSource> CreateCudaHostArenaSource();

}  // namespace zero
