// Pinned host arenas on machines with cards: cudaHostAlloc (portable, so every
// card's copy engine can DMA from them at full speed). Compiled everywhere,
// called only when the DeviceSystem's backend is cuda.
#pragma once

#include <memory>

#include "offload/internal/arena_source.h"

namespace zero {

// Pins with card `ordinal` current (restored after), so no other card's
// context is created for it: cudaHostAlloc needs one, and on a thread with
// none the runtime would make card 0's.
std::unique_ptr<ArenaSource> CreateCudaHostArenaSource(int ordinal);

}  // namespace zero
