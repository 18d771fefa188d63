// NCCL's numbers for the element types and reductions (ncclDataType_t,
// ncclRedOp_t), in one table: the NCCL backend hands them to NCCL and the C
// ABI (zero/capi/zero_engine.h) uses them as its own codes. Needs no
// nccl.h, so the C ABI builds without it; nccl_api.cc checks the table
// against nccl.h at compile time. Constants and pure functions, any thread.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "zero/comm/collective.h"

namespace zero {

template <class E>
struct NcclCodeEntry {
  E value;
  int code;
  std::string_view name;  // in error messages
};

inline constexpr NcclCodeEntry<DType> kNcclDTypes[] = {
    {DType::kF32, 7, "f32"}, {DType::kBF16, 9, "bf16"}, {DType::kF16, 6, "f16"}};
inline constexpr NcclCodeEntry<ReduceOp> kNcclReduceOps[] = {
    {ReduceOp::kSum, 0, "sum"}, {ReduceOp::kMax, 2, "max"}, {ReduceOp::kAvg, 4, "avg"}};

template <class E, size_t N>
constexpr int NcclCodeIn(const NcclCodeEntry<E> (&table)[N], E value) {
  for (const NcclCodeEntry<E>& entry : table) {
    if (entry.value == value) return entry.code;
  }
  return -1;
}

// NCCL's code of a valid enum value (-1 for a value outside the enum).
constexpr int NcclCode(DType dtype) { return NcclCodeIn(kNcclDTypes, dtype); }
constexpr int NcclCode(ReduceOp op) { return NcclCodeIn(kNcclReduceOps, op); }

// Back from a code: InvalidArgument naming a code that is none of ours
// ("dtype code 8 is not f32 (7), bf16 (9) or f16 (6)").
absl::StatusOr<DType> DTypeFromNccl(int code);
absl::StatusOr<ReduceOp> ReduceOpFromNccl(int code);

}  // namespace zero
