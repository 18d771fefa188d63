// The timeline's CSV export (memory/timeline.h), written through base's
// atomic file.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TimelineTest, TimelineGoesToAFile) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, size_t{64} << 20});
  void* p = *system->pool(0).Allocate(1000, Tag::kGradients);
  ASSERT_TRUE(system->pool(0).Deallocate(p, 1000).ok());
  const std::string path = TempDir() + "/timeline.csv";
  ASSERT_TRUE(system->pool(0).timeline().WriteCsv(path).ok());
  const std::string csv = ReadAll(path);
  EXPECT_EQ(csv.rfind("time_ns,action,device,address,size,tag,stream\n", 0), 0u);
  EXPECT_NE(csv.find(",alloc,0,"), std::string::npos);
  EXPECT_NE(csv.find(",free_completed,0,"), std::string::npos);
}

}  // namespace
}  // namespace zero
