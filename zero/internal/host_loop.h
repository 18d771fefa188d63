// Element-wise work the engine still does as host loops over its device
// memory (mixed-precision reduction, accumulation, restore): run once the
// stream is done with the memory; nothing on meta devices; Unimplemented on
// cards until the loops have kernels (issue 10's element-wise layer).
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "zero/internal/rank_context.h"

namespace zero {

absl::Status RunOnHost(const RankContext& ctx, const char* what, const std::function<void()>& loop);

}  // namespace zero
