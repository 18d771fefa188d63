// The flat layout: every parameter aligned, the padding exactly what the
// alignment costs, and the ranks' pieces tiling every parameter.
#include "zero/layout.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zero {
namespace {

// Odd sizes, so most parameters end off a multiple of kAlign.
std::vector<ParamSpec> OddSpecs() {
  return {{"a", 100, 0}, {"b", 3, 0}, {"c", 257, 1}, {"d", 16, 1}, {"e", 1, 1}, {"f", 33, 2}};
}

TEST(LayoutTest, EveryParameterStartsAligned) {
  for (int world : {1, 3, 8}) {
    for (size_t bucket : {size_t{50}, size_t{1000}}) {
      auto layout = Layout::Create(OddSpecs(), world, bucket, true);
      ASSERT_TRUE(layout.ok()) << layout.status();
      size_t end = 0;
      for (const ParamSlot& p : layout->params()) {
        EXPECT_EQ(p.offset % Layout::kAlign, 0u) << p.name << " world " << world;
        EXPECT_GE(p.offset, end) << p.name << " overlaps the one before";
        end = p.offset + p.numel;
      }
      for (const Unit& u : layout->units()) {
        EXPECT_EQ(u.padded % (world * Layout::kAlign), 0u);
        EXPECT_EQ(u.shard * world, u.padded);
      }
      EXPECT_EQ(layout->shard_numel() * world, layout->padded_numel());
    }
  }
}

// Parameters and PaddingOf tile each unit exactly; the padding is what
// alignment costs and no more: under kAlign per parameter, under one
// world x kAlign quantum per unit.
TEST(LayoutTest, PaddingIsTheRestOfEachUnitAndBounded) {
  const int world = 4;
  auto layout = Layout::Create(OddSpecs(), world, 200, false);
  ASSERT_TRUE(layout.ok()) << layout.status();
  size_t padding = 0;
  for (int u = 0; u < static_cast<int>(layout->units().size()); ++u) {
    const Unit& unit = layout->units()[u];
    std::vector<int> covered(unit.padded, 0);
    for (int p = unit.first_param; p < unit.end_param; ++p) {
      const ParamSlot& slot = layout->params()[p];
      for (size_t e = 0; e < slot.numel; ++e) ++covered[slot.offset - unit.offset + e];
    }
    for (const auto& [begin, end] : layout->PaddingOf(u)) {
      ASSERT_LT(begin, end);
      padding += end - begin;
      for (size_t e = begin; e < end; ++e) ++covered[e];
    }
    for (size_t e = 0; e < unit.padded; ++e) ASSERT_EQ(covered[e], 1) << "unit " << u << " @" << e;
    EXPECT_EQ(unit.extent, layout->params()[unit.end_param - 1].offset +
                               layout->params()[unit.end_param - 1].numel - unit.offset);
  }
  EXPECT_EQ(padding, layout->padded_numel() - layout->numel());
  const size_t params = layout->params().size(), units = layout->units().size();
  EXPECT_LT(padding, params * Layout::kAlign + units * world * Layout::kAlign);
  // "a" ends at 100: "b" starts at 112, "c" (a new unit) at the next quantum.
  EXPECT_EQ(layout->params()[1].offset, 112u);
}

// The ranks' pieces of every parameter cover it exactly once, in order.
TEST(LayoutTest, PiecesTileEveryParameter) {
  for (int world : {1, 2, 5}) {
    auto layout = Layout::Create(OddSpecs(), world, 64, true);
    ASSERT_TRUE(layout.ok()) << layout.status();
    for (int p = 0; p < static_cast<int>(layout->params().size()); ++p) {
      size_t next = 0;
      for (const Piece& piece : layout->PiecesOf(p)) {
        EXPECT_EQ(piece.param_offset, next);
        EXPECT_LT(piece.shard_offset + piece.count, layout->shard_numel() + 1);
        next += piece.count;
      }
      EXPECT_EQ(next, layout->params()[p].numel) << "world " << world << " param " << p;
    }
  }
}

// Module ids index the engine's per-module tables: a negative one was an
// out-of-bounds write (a crash at every stage), a huge one billions of
// empty entries. Refused, naming the parameter.
TEST(LayoutTest, ModuleIdsOutsideTheParametersAreRefused) {
  for (int module : {-1, 2, 1 << 30}) {
    absl::StatusOr<Layout> layout =
        Layout::Create({{"a", 64, 0}, {"b", 64, module}}, 2, 128, /*split_at_modules=*/true);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument) << module;
    EXPECT_NE(layout.status().message().find("'b' (#1) is in module"), std::string::npos)
        << layout.status();
  }
  EXPECT_TRUE(Layout::Create({{"a", 64, 0}, {"b", 64, 1}}, 2, 128, true).ok());
}

}  // namespace
}  // namespace zero
