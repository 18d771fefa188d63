// The one table of NCCL's codes (zero/comm/nccl_codes.h): NCCL's numbers,
// both ways, and errors that list what is known.
#include "zero/comm/nccl_codes.h"

#include <string>

#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(NcclCodes, AreNcclsNumbersBothWays) {
  EXPECT_EQ(NcclCode(DType::kF16), 6);
  EXPECT_EQ(NcclCode(DType::kF32), 7);
  EXPECT_EQ(NcclCode(DType::kBF16), 9);
  EXPECT_EQ(NcclCode(ReduceOp::kSum), 0);
  EXPECT_EQ(NcclCode(ReduceOp::kMax), 2);
  EXPECT_EQ(NcclCode(ReduceOp::kAvg), 4);
  for (DType d : {DType::kF16, DType::kF32, DType::kBF16}) {
    EXPECT_EQ(*DTypeFromNccl(NcclCode(d)), d);
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    EXPECT_EQ(*ReduceOpFromNccl(NcclCode(op)), op);
  }
}

TEST(NcclCodes, AnUnknownCodeIsNamedWithTheKnownOnes) {
  const absl::Status dtype = DTypeFromNccl(8).status();
  EXPECT_TRUE(absl::IsInvalidArgument(dtype));
  EXPECT_EQ(dtype.message(), "dtype code 8 is not f32 (7), bf16 (9) or f16 (6)");
  const absl::Status op = ReduceOpFromNccl(1).status();
  EXPECT_TRUE(absl::IsInvalidArgument(op));
  EXPECT_EQ(op.message(), "reduction code 1 is not sum (0), max (2) or avg (4)");
}

}  // namespace
}  // namespace zero
