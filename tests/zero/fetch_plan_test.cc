// FetchPlan on its own: the window's budget counts gathered and ungathered
// entries alike, claims keep units for a later use, persistent units are
// not planned, and the reuse distance reads positions ahead.
#include "zero/internal/fetch_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace zero {
namespace {

// Modules 0,1,2,1,0 (forward then backward of 0 and 1); module m is unit m;
// unit 2 is persistent; every unit is 10 elements.
FetchPlan Plan() {
  return FetchPlan({0, 1, 2, 1, 0}, {{0}, {1}, {2}}, {false, false, true}, {10, 10, 10});
}

std::vector<int> TakeAll(FetchPlan& plan, size_t budget) {
  std::vector<int> taken;
  while (std::optional<int> u = plan.Next(budget)) {
    taken.push_back(*u);
    plan.Take();
  }
  return taken;
}

TEST(FetchPlanTest, TheWindowHoldsTheBudgetOfEntriesAhead) {
  FetchPlan plan = Plan();
  plan.Advance(1);  // module 0 fetched
  EXPECT_EQ(TakeAll(plan, 25), (std::vector<int>{1, 1})) << "unit 2 is persistent";
  plan.Advance(2);  // module 1 fetched: its first entry leaves the window
  EXPECT_EQ(TakeAll(plan, 25), (std::vector<int>{0}));
  EXPECT_FALSE(plan.Next(25).has_value()) << "the plan is done";
}

TEST(FetchPlanTest, ClaimsKeepAUnitForItsLaterUse) {
  FetchPlan plan = Plan();
  plan.Advance(1);
  TakeAll(plan, 100);
  EXPECT_TRUE(plan.ClaimedAfter(1, 1)) << "module 1 is used again at position 3";
  EXPECT_TRUE(plan.ClaimedAfter(0, 1)) << "and module 0 at position 4";
  EXPECT_FALSE(plan.ClaimedAfter(0, 4));
  plan.StartStep();
  EXPECT_FALSE(plan.ClaimedAfter(1, 0)) << "a new step has no claims";
}

TEST(FetchPlanTest, ReuseDistanceLooksAhead) {
  FetchPlan plan = Plan();
  EXPECT_TRUE(plan.ReusedSoon(1, 2, 2)) << "position 3 is within 2 of 2";
  EXPECT_FALSE(plan.ReusedSoon(0, 2, 2)) << "position 4 is not";
  EXPECT_TRUE(plan.ReusedSoon(0, 2, 3));
  EXPECT_FALSE(plan.ReusedSoon(1, 4, 5)) << "no use of module 1 after position 3";
  EXPECT_FALSE(plan.ReusedSoon(1, 0, 0)) << "distance 0 keeps nothing";
}

TEST(FetchPlanTest, AnEmptyPlanPrefetchesNothing) {
  FetchPlan plan;
  EXPECT_TRUE(plan.empty());
  EXPECT_FALSE(plan.ReusedSoon(0, 0, 10));
  EXPECT_FALSE(plan.ClaimedAfter(3, 0)) << "nothing is claimed before the first step ends";
  plan.Advance(5);
  EXPECT_FALSE(plan.Next(100).has_value());
}

}  // namespace
}  // namespace zero
