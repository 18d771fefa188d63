// The rank-order reduction for transports that hand every rank's chunk to
// its reducer (an all-to-all: the Python package's process-group
// callbacks), so they give the local backend's bits: out[i] = op(chunks[0][i],
// chunks[1][i], ...) in fp32, in rank order, rounded once to `dtype`
// (zero/comm/internal/host_reduce.h), split over the process's CPU pool
// (compute/parallel.h). Host memory only; the caller's thread returns when
// it is done. Thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "zero/comm/collective.h"

namespace zero {

// `chunks` holds `world` chunks of `count` elements, rank 0's first. `out`
// may be one of them (in place); otherwise it must not overlap them.
// InvalidArgument for a world below 1 or null memory with count > 0.
absl::Status ReduceInRankOrder(DType dtype, ReduceOp op, const void* chunks, int world,
                               size_t count, void* out);

}  // namespace zero
