// The CPU runner of the element-wise operations (compute/cpu/
// run_elementwise.h) against the independent references, bit for bit: every
// map, dtype and SIMD level, odd sizes, misaligned spans, guards after the
// span, and large spans split over threads.
#include <cmath>
#include <iostream>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compute/cpu/isa.h"
#include "compute/cpu/map_table.h"
#include "compute/cpu/run_elementwise.h"
#include "compute/elementwise_rules.h"
#include "compute/parallel.h"
#include "gtest/gtest.h"
#include "tests/compute/elementwise_reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

constexpr ElementwiseKind kMaps[] = {ElementwiseKind::kWiden, ElementwiseKind::kNarrow,
                                     ElementwiseKind::kAccumulate, ElementwiseKind::kFill,
                                     ElementwiseKind::kScale};
constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
constexpr float kFactor = 0.3671875f * 1.1f;  // not a power of two: every scale rounds
constexpr float kFillValue = 1.0f + 0x1p-8f;   // a bf16 tie

std::string CaseName(ElementwiseKind kind, DType dtype, size_t n, size_t offset) {
  return std::string(Name(kind)) + " " + std::string(Name(dtype)) + " n=" + std::to_string(n) +
         " offset=" + std::to_string(offset);
}

// Runs the map on the CPU and compares every byte of the buffer.
void ExpectMapMatches(ElementwiseKind kind, DType dtype, size_t n, size_t offset) {
  MapBuffers b(kind, dtype, n, offset, static_cast<uint32_t>(n * 31 + offset));
  const float scalar = kind == ElementwiseKind::kFill ? kFillValue : kFactor;
  const std::vector<uint8_t> expected = b.Expected(scalar);
  cpu::RunElementwise(b.Op(kFillValue, &kFactor));
  EXPECT_TRUE(SameBits(b.dst, expected)) << CaseName(kind, dtype, n, offset);
}

class PerIsa : public ::testing::TestWithParam<cpu::CpuIsa> {
 protected:
  void SetUp() override {
    if (!cpu::IsSupported(GetParam())) GTEST_SKIP() << "not on this CPU";
    ASSERT_TRUE(cpu::SetCpuIsa(GetParam()).ok());
  }
  void TearDown() override { ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok()); }
};

TEST_P(PerIsa, MapsMatchTheReferenceAtEverySizeAndAlignment) {
  for (ElementwiseKind kind : kMaps) {
    for (DType dtype : kDTypes) {
      for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 4099}) {
        for (size_t offset : {0, 1}) ExpectMapMatches(kind, dtype, n, offset);
      }
    }
  }
}

TEST_P(PerIsa, SumOfSquaresIsTheElementOrderSum) {
  for (DType dtype : kDTypes) {
    for (size_t n : {0, 1, 17, 1000, 4099}) {
      MapBuffers b(ElementwiseKind::kWiden, dtype, n, 1, 7);  // src: `dtype` values
      std::vector<float> finite(n);
      for (size_t i = 0; i < n; ++i) finite[i] = DecodeAt(b.src.data() + SizeOf(dtype), dtype, i);
      for (float& v : finite) v = std::isfinite(v) ? v : 1.5f;
      const std::vector<uint8_t> src = Encode(finite, dtype);
      double sum = 0.25;  // accumulates: *dst += total
      cpu::RunElementwise({.kind = ElementwiseKind::kSumOfSquares, .dtype = dtype, .count = n,
                           .dst = &sum, .src = src.data(), .factor = nullptr, .value = 0});
      const double expected = 0.25 + ReferenceSumOfSquares(src.data(), dtype, n);
      EXPECT_EQ(std::memcmp(&sum, &expected, sizeof sum), 0)
          << Name(dtype) << " n=" << n << ": " << sum << " vs " << expected;
    }
  }
}

TEST_P(PerIsa, FlagFindsInfAndNanAnywhere) {
  const float kBad[] = {std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()};
  for (DType dtype : kDTypes) {
    for (size_t n : {1, 9, 100, 3000}) {
      std::vector<float> values(n, 3.0f);
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        for (float bad : kBad) {
          values[at] = bad;
          const std::vector<uint8_t> src = Encode(values, dtype);
          int32_t flag = 0;
          cpu::RunElementwise({.kind = ElementwiseKind::kFlagNonFinite, .dtype = dtype,
                               .count = n, .dst = &flag, .src = src.data(), .factor = nullptr,
                               .value = 0});
          EXPECT_EQ(flag, 1) << Name(dtype) << " n=" << n << " at " << at << " " << bad;
          values[at] = 3.0f;
        }
      }
      const std::vector<uint8_t> clean = Encode(values, dtype);
      int32_t flag = 7;  // left alone when nothing is found
      cpu::RunElementwise({.kind = ElementwiseKind::kFlagNonFinite, .dtype = dtype, .count = n,
                           .dst = &flag, .src = clean.data(), .factor = nullptr, .value = 0});
      EXPECT_EQ(flag, 7) << Name(dtype) << " n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, PerIsa, ::testing::ValuesIn(cpu::kAllCpuIsas),
                         [](const auto& info) { return std::string(cpu::Name(info.param)); });

// A map file built without its -m flags compiles to the scalar table
// (maps_avx2.cc, maps_avx512.cc), and every comparison above would then
// compare scalar with scalar. On x86 each level the host runs must have a
// table of its own, and be the one the runner then uses.
TEST(CpuIsaTest, EachLevelTheHostRunsHasItsOwnMaps) {
#if defined(__x86_64__)
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
    if (!cpu::IsSupported(isa)) {
      std::cout << cpu::Name(isa) << ": not on this host, not checked\n";
      continue;
    }
    EXPECT_NE(&cpu::MapsFor(isa), &cpu::ScalarMaps())
        << cpu::Name(isa) << " returns the scalar table: its file was built without its flags";
    ASSERT_TRUE(cpu::SetCpuIsa(isa).ok());
    EXPECT_EQ(&cpu::ActiveMaps(), &cpu::MapsFor(isa)) << cpu::Name(isa);
  }
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
#else
  GTEST_SKIP() << "one level only off x86";
#endif
}

// Spans long enough that ParallelFor splits them: the same bits on one
// thread and on four, and the reference's.
TEST(ElementwiseParallelTest, LargeSpansGiveTheSameBitsOnAnyThreadCount) {
  constexpr size_t kN = 200003;  // 12 chunks of ParallelFor (min_chunk 16384)
  for (ElementwiseKind kind : kMaps) {
    for (DType dtype : kDTypes) {
      MapBuffers one(kind, dtype, kN, 1, 99);
      MapBuffers four(kind, dtype, kN, 1, 99);
      const std::vector<uint8_t> expected = one.Expected(kind == ElementwiseKind::kFill
                                                             ? kFillValue
                                                             : kFactor);
      SetNumThreads(1);
      cpu::RunElementwise(one.Op(kFillValue, &kFactor));
      SetNumThreads(4);
      cpu::RunElementwise(four.Op(kFillValue, &kFactor));
      EXPECT_TRUE(SameBits(one.dst, expected)) << CaseName(kind, dtype, kN, 1) << " 1 thread";
      EXPECT_TRUE(SameBits(four.dst, expected)) << CaseName(kind, dtype, kN, 1) << " 4 threads";
    }
  }
  SetNumThreads(0);
}

// torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6),
// clamped to at most 1 by torch.clamp, which keeps a NaN. A NaN norm makes
// every gradient NaN (the scale was left as it was, so only the non-finite
// gradients were), an infinite one zeroes them, a small one is untouched.
TEST(StepScalarsTest, TheClipCoefficientIsTorchs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double with_nan[] = {nan, 4.0};
  EXPECT_TRUE(std::isnan(StepScalarsOf(with_nan, 2, 0.5f, 1.0).grad_scale));
  const double with_inf[] = {inf, 4.0};
  EXPECT_EQ(StepScalarsOf(with_inf, 2, 0.5f, 1.0).grad_scale, 0.0f);
  const double small[] = {0.25, 0.0};  // norm 0.25: no clipping
  EXPECT_EQ(StepScalarsOf(small, 2, 0.5f, 1.0).grad_scale, 0.5f);
  const double large[] = {64.0, 0.0};  // mean norm 4: coefficient 1 / (4 + 1e-6)
  EXPECT_EQ(StepScalarsOf(large, 2, 0.5f, 1.0).grad_scale,
            static_cast<float>(0.5 * (1.0 / (4.0 + 1e-6))));
  EXPECT_EQ(StepScalarsOf(with_nan, 2, 0.5f, 0.0).grad_scale, 0.5f) << "clipping off";
}

}  // namespace
}  // namespace zero::testing
