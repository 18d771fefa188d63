// The forecast the pager evicts and prefetches by.
#include "offload/internal/access_order.h"

#include <vector>

#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(AccessOrderTest, NextUseIsTheFirstPositionAtOrAfter) {
  const AccessOrder order({7, 8, 9, 7, 8});
  EXPECT_EQ(order.size(), 5u);
  EXPECT_EQ(order.NextUse(7, 0), 0u);
  EXPECT_EQ(order.NextUse(7, 1), 3u);
  EXPECT_EQ(order.NextUse(9, 3), AccessOrder::kNever) << "not used again";
  EXPECT_EQ(order.NextUse(42, 0), AccessOrder::kNever) << "never recorded";
  EXPECT_EQ(order.NextUse(8, 99), AccessOrder::kNever) << "past the end";
}

TEST(AccessOrderTest, UpcomingListsDistinctIdsInOrder) {
  const AccessOrder order({1, 2, 1, 3, 2, 4});
  EXPECT_EQ(order.Upcoming(0, 10), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(order.Upcoming(2, 2), (std::vector<uint64_t>{1, 3}));
  EXPECT_TRUE(order.Upcoming(6, 3).empty());
  EXPECT_TRUE(AccessOrder().empty());
}

}  // namespace
}  // namespace zero
