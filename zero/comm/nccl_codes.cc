#include "zero/comm/nccl_codes.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace zero {
namespace {

// The entry whose code is `code`, else an error listing the table
// ("<what> code 8 is not f32 (7), bf16 (9) or f16 (6)").
template <class E, size_t N>
absl::StatusOr<E> FromCode(const NcclCodeEntry<E> (&table)[N], int code, std::string_view what) {
  std::vector<std::string> known;
  for (const NcclCodeEntry<E>& entry : table) {
    if (entry.code == code) return entry.value;
    known.push_back(absl::StrFormat("%s (%d)", entry.name, entry.code));
  }
  const std::string last = known.back();
  known.pop_back();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s code %d is not %s or %s", what, code, absl::StrJoin(known, ", "), last));
}

}  // namespace

absl::StatusOr<DType> DTypeFromNccl(int code) { return FromCode(kNcclDTypes, code, "dtype"); }

absl::StatusOr<ReduceOp> ReduceOpFromNccl(int code) {
  return FromCode(kNcclReduceOps, code, "reduction");
}

}  // namespace zero
