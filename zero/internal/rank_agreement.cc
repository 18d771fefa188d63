#include "zero/internal/rank_agreement.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace zero {

absl::Status CheckAgreement(const RankContext& ctx, uint64_t mine, const std::string& what) {
  const int n = ctx.layout.world_size();
  if (!ctx.has_bytes || n == 1) return absl::OkStatus();
  std::vector<uint64_t> host(n);
  ASSIGN_OR_RETURN(Buffer all, Buffer::Allocate(ctx.pool, n * sizeof(uint64_t),
                                                Tag::kCommunication, ctx.stream));
  uint64_t* slot = all.data<uint64_t>() + ctx.rank;
  RETURN_IF_ERROR(ctx.stream->Copy(slot, &mine, sizeof mine));
  // Two fp32 lanes per fingerprint: all-gather moves bytes, it never adds.
  RETURN_IF_ERROR(ctx.comm->AllGather(slot, all.data(), 2, DType::kF32, ctx.stream));
  RETURN_IF_ERROR(ctx.stream->Copy(host.data(), all.data(), n * sizeof(uint64_t)));
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  // A gather that failed after its call returned left `host` unwritten.
  RETURN_IF_ERROR(ctx.comm->AsyncError());
  std::vector<std::string> differ;
  for (int r = 1; r < n; ++r) {
    if (host[r] != host[0]) differ.push_back(absl::StrFormat("%d", r));
  }
  if (differ.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "ranks disagree on %s: rank(s) %s differ from rank 0", what, absl::StrJoin(differ, ", ")));
}

}  // namespace zero
