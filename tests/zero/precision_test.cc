// zero/precision.h, now a blocking front of the element-wise CPU runner,
// still computes exactly what its element-by-element loops computed.
#include "zero/precision.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/compute/elementwise_reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

TEST(PrecisionTest, MapsMatchTheElementLoops) {
  for (DType dtype : kDTypes) {
    for (size_t n : {0, 1, 31, 100003}) {
      MapBuffers widen(ElementwiseKind::kWiden, dtype, n, 1, 3);
      MapBuffers narrow(ElementwiseKind::kNarrow, dtype, n, 1, 4);
      MapBuffers add(ElementwiseKind::kAccumulate, dtype, n, 1, 5);
      const std::vector<uint8_t> widened = widen.Expected(0);
      const std::vector<uint8_t> narrowed = narrow.Expected(0);
      const std::vector<uint8_t> added = add.Expected(0);
      ElementwiseOp op = widen.Op(0, nullptr);
      Widen(op.src, dtype, static_cast<float*>(op.dst), n);
      op = narrow.Op(0, nullptr);
      Narrow(static_cast<const float*>(op.src), op.dst, dtype, n);
      op = add.Op(0, nullptr);
      AccumulateNarrow(op.dst, dtype, static_cast<const float*>(op.src), n);
      EXPECT_TRUE(SameBits(widen.dst, widened)) << Name(dtype) << " n=" << n;
      EXPECT_TRUE(SameBits(narrow.dst, narrowed)) << Name(dtype) << " n=" << n;
      EXPECT_TRUE(SameBits(add.dst, added)) << Name(dtype) << " n=" << n;
    }
  }
}

TEST(PrecisionTest, SumOfSquaresKeepsElementOrder) {
  for (DType dtype : kDTypes) {
    const std::vector<uint8_t> x = Encode(RandomFloats(100003, 8, 2.0f), dtype);
    const double got = SumOfSquares(x.data(), dtype, 100003);
    const double want = ReferenceSumOfSquares(x.data(), dtype, 100003);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << Name(dtype);
  }
}

}  // namespace
}  // namespace zero::testing
