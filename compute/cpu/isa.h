// Which SIMD level the CPU kernels run at. Chosen once at start (the best this
// CPU supports) and switchable at run time, e.g. by tests comparing levels.
// Every level gives bit-identical results. Thread-safe.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace zero::cpu {

enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512};

std::string_view Name(CpuIsa isa);

// Whether this build has the level and this CPU (and OS) can run it.
bool IsSupported(CpuIsa isa);
CpuIsa BestCpuIsa();

// The level used by the CPU kernels (compute/ and optimizers/) from now on; FailedPrecondition if this
// CPU cannot run it. Calls already running finish at the old level.
absl::Status SetCpuIsa(CpuIsa isa);
CpuIsa ActiveCpuIsa();

}  // namespace zero::cpu
