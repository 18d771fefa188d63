// A collective check that every rank holds the same value (a fingerprint of
// its layout, config or fetch order), so a mismatch fails every rank alike
// instead of desynchronizing the collectives that follow.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "zero/internal/rank_context.h"

namespace zero {

// Collective. FailedPrecondition naming `what` and the ranks that differ
// from rank 0. Meta devices move no bytes: there the check is left to the
// collective sequence.
absl::Status CheckAgreement(const RankContext& ctx, uint64_t mine, const std::string& what);

}  // namespace zero
