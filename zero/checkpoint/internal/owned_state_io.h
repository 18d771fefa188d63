// Moving a rank's owned model states between the engine and host memory,
// and the checks that make that safe. Internal to save.cc and load.cc.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/agreement.h"

namespace zero::checkpoint {

// Local checks every rank reaches alike: a device with bytes, the engine's
// world size equal to the communicator's, and the optimizer's state count
// equal to what owned_state() returns.
absl::Status CheckParticipant(const Participant& rank);

// The bookkeeping collectives on the engine's stream and device pool.
Agreement AgreementFor(const Participant& rank);

// Buffers per element: master weights, then each optimizer state.
int BufferCount(const Participant& rank);

// Enqueue on engine.stream(), from or into buffer `buffer` (0: masters,
// 1 + i: state i) of unit `unit`'s owned piece at element `at` of the piece,
// `count` elements to or from `host` (kept until the stream has run the
// copy), or zeros.
absl::Status EnqueueCopyToHost(Engine& engine, int unit, int buffer, size_t at, float* host,
                               size_t count);
absl::Status EnqueueCopyFromHost(Engine& engine, int unit, int buffer, size_t at,
                                 const float* host, size_t count);
absl::Status EnqueueZeros(Engine& engine, int unit, int buffer, size_t at, size_t count);

}  // namespace zero::checkpoint
