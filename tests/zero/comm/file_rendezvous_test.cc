// The multi-node NCCL id exchange, on plain files (no NCCL needed).
#include "zero/comm/file_rendezvous.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace zero {
namespace {

FileRendezvous Fresh(const std::string& name, absl::Duration timeout) {
  const char* dir = std::getenv("TEST_TMPDIR");
  FileRendezvous r{.path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name,
                   .timeout = timeout,
                   .poll_interval = absl::Milliseconds(5)};
  (void)RemoveId(r);
  return r;
}

TEST(FileRendezvousTest, WaitersGetThePublishedId) {
  const FileRendezvous r = Fresh("id_published", absl::Seconds(30));
  const std::string id(128, '\0');  // binary, NULs included
  std::string got[3];
  std::thread waiters[3];
  for (int i = 0; i < 3; ++i) {
    waiters[i] = std::thread([&, i] {
      auto result = AwaitId(r, id.size());
      got[i] = result.ok() ? *result : result.status().ToString();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::string published = id;
  published[5] = 'x';
  ASSERT_TRUE(PublishId(r, published).ok());
  for (auto& t : waiters) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, published);
  EXPECT_TRUE(RemoveId(r).ok());
  EXPECT_TRUE(RemoveId(r).ok());  // already gone is fine
}

TEST(FileRendezvousTest, TimesOutWhenNobodyPublishes) {
  const FileRendezvous r = Fresh("id_missing", absl::Milliseconds(50));
  const auto result = AwaitId(r, 128);
  EXPECT_TRUE(absl::IsDeadlineExceeded(result.status())) << result.status();
}

TEST(FileRendezvousTest, RejectsAForeignFile) {
  const FileRendezvous r = Fresh("id_foreign", absl::Seconds(5));
  std::ofstream(r.path) << "not an id";
  EXPECT_TRUE(absl::IsDataLoss(AwaitId(r, 128).status()));
  ASSERT_TRUE(PublishId(r, std::string(16, 'a')).ok());
  EXPECT_TRUE(absl::IsDataLoss(AwaitId(r, 128).status()));  // wrong size
}

TEST(FileRendezvousTest, EmptyPathIsInvalid) {
  EXPECT_TRUE(absl::IsInvalidArgument(PublishId({}, "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(AwaitId({}, 1).status()));
}

}  // namespace
}  // namespace zero
