// The group-failure messages both backends produce, so a user reads the
// same words whichever backend found the problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "zero/comm/collective.h"

namespace zero {

// "rank 3", "ranks 0-2,5". `ranks` sorted ascending.
std::string RankList(const std::vector<int>& ranks);

// Ranks grouped by their label, groups in order of their lowest rank:
// {"A","A","B","A"} -> "ranks 0-1,3 A; rank 2 B".
std::string GroupRanks(absl::Span<const std::string> label_by_rank);

// FailedPrecondition "collective #17 differs: rank 0 AllGather(f32 x 1024);
// rank 3 ReduceScatter(f32 x 256, sum)". calls[r] is rank r's call number
// `seq`, or nullopt for a rank not (yet) known ("not arrived").
absl::Status MismatchError(uint64_t seq, absl::Span<const std::optional<CollectiveCall>> calls);

// FailedPrecondition "collective #5 failed on rank 2: <cause's message>": what
// the peers of a rank get when that rank cannot take part in call `seq`.
absl::Status RankFailedError(uint64_t seq, int rank, const absl::Status& cause);

}  // namespace zero
