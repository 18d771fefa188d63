// Parameter groups (optimizers/grouped_optimizer.h): each element range
// steps with its group's hyper-parameters, bit for bit as that group's own
// optimizer would, however the caller slices the elements; Bind refuses
// ranges it cannot honour.
#include "optimizers/grouped_optimizer.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/optimizers/test_util.h"

namespace zero {
namespace {

using testing::Problem;
using testing::SameResults;

// Two AdamW groups that differ in every setting a step reads.
OptimizerGroups TwoGroups() {
  OptimizerGroups groups;
  groups.kind = OptimizerGroups::Kind::kAdamW;
  AdamConfig zero = AdamWDefaults(), one = AdamWDefaults();
  zero.lr = 1e-2;
  one.lr = 3e-3;
  one.weight_decay = 0.1;
  one.beta1 = 0.8;
  groups.adam = {zero, one};
  return groups;
}

constexpr size_t kElements = 100;
// [90, 100) is in no range: group 0's.
const std::vector<GroupRange> kRanges = {{0, 30, 1}, {30, 60, 0}, {60, 90, 1}};

// Steps `p` through `opt` in slices [cuts[i], cuts[i + 1]), each numbered
// from its first element, as an engine steps its pieces.
void StepInSlices(Optimizer& opt, Problem& p, int64_t step, const std::vector<size_t>& cuts) {
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    StepArgs args = p.Args(step, cuts[i], cuts[i + 1]);
    args.first_element = cuts[i];
    ASSERT_TRUE(opt.Step(args).ok());
  }
}

TEST(GroupedOptimizer, EachRangeStepsAsItsGroupsOwnOptimizer) {
  const OptimizerGroups groups = TwoGroups();
  auto grouped = *GroupedOptimizer::Create(groups);
  ASSERT_TRUE(grouped->Bind(kRanges).ok());
  auto zero = *groups.Make(0), one = *groups.Make(1);
  Problem actual(kElements, DType::kBF16, 2, DType::kBF16), expected = actual;
  for (int64_t step = 1; step <= 3; ++step) {
    actual.SetGrads(step);
    expected.SetGrads(step);
    // Slices that cross every group border, and one that starts inside a range.
    StepInSlices(*grouped, actual, step, {0, 45, 61, 100});
    StepInSlices(*one, expected, step, {0, 30});
    StepInSlices(*zero, expected, step, {30, 60});
    StepInSlices(*one, expected, step, {60, 90});
    StepInSlices(*zero, expected, step, {90, 100});
  }
  EXPECT_TRUE(SameResults(actual, expected));
}

TEST(GroupedOptimizer, SetGroupLrChangesOnlyThatGroup) {
  const OptimizerGroups groups = TwoGroups();
  auto grouped = *GroupedOptimizer::Create(groups);
  ASSERT_TRUE(grouped->SetGroupLr(1, 0.5).ok());
  EXPECT_EQ(grouped->group_lr(0), 1e-2);
  EXPECT_EQ(grouped->group_lr(1), 0.5);
  const absl::Status none = grouped->SetGroupLr(2, 0.5);
  EXPECT_TRUE(absl::IsInvalidArgument(none));
  EXPECT_NE(none.message().find("no parameter group 2 (2 are configured)"), std::string::npos);
}

TEST(GroupedOptimizer, BindRefusesRangesItCannotHonourAndKeepsTheOldOnes) {
  const OptimizerGroups groups = TwoGroups();
  auto grouped = *GroupedOptimizer::Create(groups);
  ASSERT_TRUE(grouped->Bind(kRanges).ok());
  const std::vector<std::vector<GroupRange>> bad = {
      {{0, 30, 1}, {20, 40, 0}},  // overlapping
      {{30, 60, 0}, {0, 30, 1}},  // out of order
      {{10, 5, 0}},               // reversed
      {{0, 30, 2}},               // no group 2
      {{0, 30, -1}},
  };
  for (const std::vector<GroupRange>& ranges : bad) {
    const absl::Status refused = grouped->Bind(ranges);
    EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
    EXPECT_NE(refused.message().find("element range"), std::string::npos) << refused;
  }
  // Still bound as before: the first range is group 1's.
  auto one = *groups.Make(1);
  Problem actual(30, DType::kF32, 2, std::nullopt), expected = actual;
  actual.SetGrads(1);
  expected.SetGrads(1);
  StepInSlices(*grouped, actual, 1, {0, 30});
  StepInSlices(*one, expected, 1, {0, 30});
  EXPECT_TRUE(SameResults(actual, expected));
}

TEST(GroupedOptimizer, CreateNamesTheGroupWithBadSettings) {
  OptimizerGroups groups = TwoGroups();
  groups.adam[1].lr = -1;
  const absl::Status bad = GroupedOptimizer::Create(groups).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_NE(bad.message().find("parameter group 1"), std::string::npos) << bad;
  groups.adam.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(GroupedOptimizer::Create(groups).status()));
}

}  // namespace
}  // namespace zero
