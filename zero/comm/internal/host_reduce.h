// Element-wise reduction over several host buffers, for the local backend.
#pragma once

#include <cstddef>

#include "absl/types/span.h"
#include "base/dtype.h"
#include "zero/comm/collective.h"

namespace zero {

// dst[i] = op(sources[0][i], sources[1][i], ...) for i < count: in fp32, in
// the order given (so the result equals a sequential loop over the sources),
// then rounded once to `dtype`; kAvg divides the sum by sources.size(), kMax
// propagates NaN. dst may start where one source starts; otherwise it must
// not overlap them. dtype and op must be valid; sources must not be empty.
void HostReduce(DType dtype, ReduceOp op, absl::Span<const void* const> sources, void* dst,
                size_t count);

}  // namespace zero
