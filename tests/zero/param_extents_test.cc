// Layout::ParamExtents (zero/layout.h): each parameter with the gap or
// padding after it, tiling the flat buffer in order, so per-parameter
// settings (optimizer groups) cover every element a step sees.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "zero/layout.h"

namespace zero {
namespace {

TEST(ParamExtents, TileTheFlatBufferInParameterOrder) {
  const std::vector<ParamSpec> specs = {{"a", 100, 0}, {"b", 3, 0},  {"c", 257, 1},
                                        {"d", 16, 1},  {"e", 1, 1}, {"f", 33, 2}};
  for (int world : {1, 3, 8}) {
    for (size_t bucket : {size_t{50}, size_t{1000}}) {
      auto layout = Layout::Create(specs, world, bucket, true);
      ASSERT_TRUE(layout.ok()) << layout.status();
      const std::vector<ParamExtent> extents = layout->ParamExtents();
      ASSERT_EQ(extents.size(), specs.size());
      size_t at = 0;
      for (size_t p = 0; p < extents.size(); ++p) {
        const ParamSlot& slot = layout->params()[p];
        EXPECT_EQ(extents[p].param, static_cast<int>(p));
        EXPECT_EQ(extents[p].begin, at) << slot.name << ": a gap before it";
        EXPECT_EQ(extents[p].begin, slot.offset) << slot.name;
        EXPECT_GE(extents[p].end, slot.offset + slot.numel) << slot.name << " is cut short";
        at = extents[p].end;
      }
      EXPECT_EQ(at, layout->padded_numel()) << "world " << world << " bucket " << bucket;
    }
  }
}

}  // namespace
}  // namespace zero
