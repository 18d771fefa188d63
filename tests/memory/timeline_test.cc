// The timeline's CSV export (memory/timeline.h), written through base's
// atomic file.
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

TEST(TimelineTest, TimelineGoesToAFile) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, size_t{64} << 20});
  void* p = *system->pool(0).Allocate(1000, Tag::kGradients);
  ASSERT_TRUE(system->pool(0).Deallocate(p, 1000).ok());
  const std::string path = ::testing::TempDir() + "/timeline.csv";
  ASSERT_TRUE(system->pool(0).timeline().WriteCsv(path).ok());
  std::ifstream in(path);
  const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(csv.rfind("time_ns,action,device,address,size,tag,stream\n", 0), 0u);
  EXPECT_NE(csv.find(",alloc,0,"), std::string::npos);
  EXPECT_NE(csv.find(",free_completed,0,"), std::string::npos);
}

}  // namespace
}  // namespace zero
