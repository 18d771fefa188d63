#include "base/units.h"

#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(UnitsTest, ParsesDecimalAndBinaryUnits) {
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("16GiB"), 16 * kGiB);
  EXPECT_EQ(*ParseBytes("80GB"), 80'000'000'000u);
  EXPECT_EQ(*ParseBytes("2mib"), 2 * kMiB);
  EXPECT_EQ(*ParseBytes("1.5KiB"), 1536u);
}

TEST(UnitsTest, RejectsGarbage) {
  EXPECT_EQ(ParseBytes("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("GiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("12parsecs").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("-3GB").status().code(), absl::StatusCode::kInvalidArgument);
  // 2^64 bytes and more do not fit in a size (the conversion was undefined).
  EXPECT_EQ(ParseBytes("17179869184GiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("99999999999999999999TiB").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseBytes("17179869183GiB"), size_t{17179869183} << 30);
  // The nearest byte, never a fraction of one.
  EXPECT_EQ(*ParseBytes("4.35GB"), size_t{4'350'000'000});
  EXPECT_EQ(*ParseBytes("0.5KiB"), size_t{512});
  EXPECT_EQ(ParseBytes("1.5").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBytes("0.3KiB").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnitsTest, FormatsReadably) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3 * kMiB / 2), "1.50 MiB");
  EXPECT_EQ(FormatBytes(16 * kGiB), "16.00 GiB");
}

TEST(UnitsTest, Alignment) {
  EXPECT_TRUE(IsPowerOfTwo(4096));
  EXPECT_FALSE(IsPowerOfTwo(0));
  EXPECT_FALSE(IsPowerOfTwo(48));
  EXPECT_EQ(AlignUp(513, 512), 1024u);
  EXPECT_EQ(RoundUp(3, 48), 48u);
  EXPECT_EQ(RoundUp(97, 48), 144u);
  EXPECT_EQ(RoundUp(96, 48), 96u);
  EXPECT_EQ(AlignDown(1023, 512), 512u);
}

}  // namespace
}  // namespace zero
