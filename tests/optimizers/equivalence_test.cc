// The properties the engine relies on, for every optimizer, grad dtype and
// copy dtype: results equal torch's formulas bit for bit, and do not depend
// on the SIMD level, the thread count or how the array is sliced.
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "compute/cpu/isa.h"
#include "compute/parallel.h"
#include "gtest/gtest.h"
#include "optimizers/cpu/kernel_table.h"
#include "tests/optimizers/reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

struct Case {
  Kind kind;
  DType grad;
  std::optional<DType> copy;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return KindName(c.kind) + "_" + std::string(Name(c.grad)) + "_copy_" +
         (c.copy ? std::string(Name(*c.copy)) : "none");
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (Kind kind : kAllKinds) {
    for (DType grad : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (std::optional<DType> copy : {std::optional<DType>(), std::optional(DType::kF32),
                                        std::optional(DType::kBF16), std::optional(DType::kF16)}) {
        cases.push_back({kind, grad, copy});
      }
    }
  }
  return cases;
}

// The levels this host runs, e.g. "scalar avx2" (the others are skipped).
std::string IsasRun() {
  std::string names;
  for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
    if (!cpu::IsSupported(isa)) continue;
    if (!names.empty()) names += " ";
    names += cpu::Name(isa);
  }
  return names;
}

constexpr int kSteps = 3;
constexpr size_t kSize = 1000 + 37;  // not a multiple of any vector width

class EquivalenceTest : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override {
    ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
    SetNumThreads(0);
  }

  Problem NewProblem(size_t n = kSize) {
    const Case& c = GetParam();
    return Problem(n, c.grad, MakeOptimizerFor(c.kind)->state_buffers(), c.copy);
  }
};

TEST_P(EquivalenceTest, MatchesTorchReference) {
  const AnyConfig config = ConfigFor(GetParam().kind);
  std::unique_ptr<Optimizer> opt = MakeOptimizerFor(config);
  Problem actual = NewProblem();
  Problem expected = NewProblem();
  for (int step = 1; step <= kSteps; ++step) {
    const float scale = step == 2 ? 0.25f : 1.0f;
    actual.SetGrads(step);
    expected.SetGrads(step);
    ASSERT_TRUE(opt->Step(actual.Args(step, 0, kSize, scale)).ok());
    ReferenceStep(config, step, scale, expected);
    ReferenceCopy(expected);
    ASSERT_TRUE(SameResults(actual, expected)) << "step " << step;
  }
}

TEST_P(EquivalenceTest, EverySimdLevelMatchesScalar) {
  std::unique_ptr<Optimizer> opt = MakeOptimizerFor(GetParam().kind);
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::CpuIsa::kScalar).ok());
  Problem scalar = NewProblem();
  RunSteps(*opt, scalar, kSteps);
  for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
    if (!cpu::IsSupported(isa)) continue;
    ASSERT_TRUE(cpu::SetCpuIsa(isa).ok());
    Problem vector = NewProblem();
    RunSteps(*opt, vector, kSteps);
    EXPECT_TRUE(SameResults(vector, scalar)) << cpu::Name(isa);
  }
  // A level this host lacks is not compared: say which were.
  RecordProperty("isas_compared", IsasRun());
}

TEST_P(EquivalenceTest, SlicesMatchWhole) {
  std::unique_ptr<Optimizer> opt = MakeOptimizerFor(GetParam().kind);
  Problem whole = NewProblem();
  RunSteps(*opt, whole, kSteps);
  for (size_t split : {size_t{1}, size_t{7}, size_t{16}, size_t{33}, size_t{500}, kSize - 1}) {
    Problem sliced = NewProblem();
    for (int step = 1; step <= kSteps; ++step) {
      sliced.SetGrads(step);
      ASSERT_TRUE(opt->Step(sliced.Args(step, 0, split)).ok());
      ASSERT_TRUE(opt->Step(sliced.Args(step, split, kSize)).ok());
    }
    EXPECT_TRUE(SameResults(sliced, whole)) << "split at " << split;
  }
}

// The engine hands the scale over in (device) memory, written by an earlier
// operation: the same bits as the value, maximizing included (-1 x *at).
TEST_P(EquivalenceTest, ScaleReadFromMemoryMatchesTheValue) {
  for (bool maximize : {false, true}) {
    AnyConfig config = ConfigFor(GetParam().kind);
    std::visit([&](auto& c) { c.maximize = maximize; }, config);
    std::unique_ptr<Optimizer> opt = MakeOptimizerFor(config);
    Problem by_value = NewProblem();
    Problem in_memory = NewProblem();
    for (int step = 1; step <= kSteps; ++step) {
      const float scale = 0.0390625f * static_cast<float>(step);
      by_value.SetGrads(step);
      in_memory.SetGrads(step);
      ASSERT_TRUE(opt->Step(by_value.Args(step, 0, kSize, scale)).ok());
      StepArgs args = in_memory.Args(step, 0, kSize, 1.0f);
      args.grad_scale_at = &scale;
      ASSERT_TRUE(opt->Step(args).ok());
    }
    EXPECT_TRUE(SameResults(in_memory, by_value)) << "maximize " << maximize;
  }
}

INSTANTIATE_TEST_SUITE_P(AllOptimizersAndDtypes, EquivalenceTest, ::testing::ValuesIn(AllCases()),
                         CaseName);

// Large enough that the pool splits it into several chunks.
TEST(ThreadsTest, ThreadCountDoesNotChangeResults) {
  constexpr size_t kLarge = 200003;
  for (Kind kind : {Kind::kAdamW, Kind::kSgdMomentum}) {
    std::unique_ptr<Optimizer> opt = MakeOptimizerFor(kind);
    SetNumThreads(1);
    Problem one(kLarge, DType::kBF16, opt->state_buffers(), DType::kBF16);
    RunSteps(*opt, one, 2);
    for (int threads : {2, 3, 8}) {
      SetNumThreads(threads);
      Problem many(kLarge, DType::kBF16, opt->state_buffers(), DType::kBF16);
      RunSteps(*opt, many, 2);
      EXPECT_TRUE(SameResults(many, one)) << KindName(kind) << " threads " << threads;
    }
  }
  SetNumThreads(0);
}

// Infinities, NaNs, overflowing copies and subnormals go through every SIMD
// level exactly as through the scalar one.
TEST(SpecialValuesTest, EverySimdLevelMatchesScalar) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> specials = {inf,    -inf,     nan,   -nan, 3e38f, -3e38f,
                                       1e-45f, 65520.0f, 6e-8f, 0.0f, -0.0f, 1e30f};
  for (Kind kind : kAllKinds) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      std::vector<Problem> runs;
      for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
        if (!cpu::IsSupported(isa)) continue;
        ASSERT_TRUE(cpu::SetCpuIsa(isa).ok());
        std::unique_ptr<Optimizer> opt = MakeOptimizerFor(kind);
        Problem& p = runs.emplace_back(101, dtype, opt->state_buffers(), dtype);
        for (size_t i = 0; i < specials.size(); ++i) p.params[7 * i] = specials[i];
        std::vector<float> grads = RandomFloats(p.size(), 5);
        for (size_t i = 0; i < specials.size(); ++i) grads[7 * i + 3] = specials[i];
        p.grads = Encode(grads, dtype);
        ASSERT_TRUE(opt->Step(p.Args(1)).ok());
        ASSERT_TRUE(opt->Step(p.Args(2)).ok());
        EXPECT_TRUE(SameResults(p, runs.front()))
            << KindName(kind) << " " << Name(dtype) << " " << cpu::Name(isa);
      }
    }
  }
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
}

// A kernel file built without its -m flags compiles to the scalar table
// (kernels_avx2.cc, kernels_avx512.cc), and every comparison above would
// then compare scalar with scalar. On x86 each level the host runs must
// have a table of its own, and be the one the optimizers then use.
TEST(CpuIsaTest, EachLevelTheHostRunsHasItsOwnKernels) {
  std::cout << "SIMD levels run on this host: " << IsasRun() << "\n";
  RecordProperty("isas_run", IsasRun());
#if defined(__x86_64__)
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
    if (!cpu::IsSupported(isa)) {
      std::cout << cpu::Name(isa) << ": not on this host, not checked\n";
      continue;
    }
    EXPECT_NE(&cpu::KernelsFor(isa), &cpu::ScalarKernels())
        << cpu::Name(isa) << " returns the scalar table: its file was built without its flags";
    ASSERT_TRUE(cpu::SetCpuIsa(isa).ok());
    EXPECT_EQ(&cpu::ActiveKernels(), &cpu::KernelsFor(isa)) << cpu::Name(isa);
  }
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
#endif
}

TEST(CpuIsaTest, ScalarAlwaysSupportedAndSwitchable) {
  EXPECT_TRUE(cpu::IsSupported(cpu::CpuIsa::kScalar));
  EXPECT_TRUE(cpu::IsSupported(cpu::BestCpuIsa()));
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::CpuIsa::kScalar).ok());
  EXPECT_EQ(cpu::ActiveCpuIsa(), cpu::CpuIsa::kScalar);
  for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
    const absl::Status s = cpu::SetCpuIsa(isa);
    EXPECT_EQ(s.ok(), cpu::IsSupported(isa)) << cpu::Name(isa);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    }
  }
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
}

}  // namespace
}  // namespace zero::testing
