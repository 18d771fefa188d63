#include "base/atomic_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

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

TEST(AtomicFileTest, WritesAndReplacesWholeFiles) {
  const std::string path = TempDir() + "/atomic.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(ReadAll(path), "second");
}

TEST(AtomicFileTest, AFolderThatIsNotThereIsAnErrorNotACrash) {
  absl::Status s = WriteFileAtomically(TempDir() + "/no/such/folder/x.txt", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(s.message()).find("cannot create"), std::string::npos);
}

// Threads of one process writing one path: each rename installs a file one
// of them wrote whole (they shared a temporary named by the pid, so one's
// truncate and writes could mix into another's rename), and no temporary
// is left behind.
TEST(AtomicFileTest, ThreadsWritingOnePathEachInstallAWholeFile) {
  const std::string folder = TempDir() + "/atomic_threads";
  mkdir(folder.c_str(), 0755);
  const std::string path = folder + "/shared.txt";
  std::vector<std::string> contents;
  for (char c : {'a', 'b', 'c', 'd'}) contents.push_back(std::string(1 << 20, c));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (const std::string& mine : contents) {
    threads.emplace_back([&, mine] {
      for (int i = 0; i < 10; ++i) {
        if (!WriteFileAtomically(path, mine).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const std::string now = ReadAll(path);
  EXPECT_NE(std::find(contents.begin(), contents.end(), now), contents.end())
      << "a mixed file of " << now.size() << " bytes";
  int entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), "shared.txt");
  }
  EXPECT_EQ(entries, 1);
}

}  // namespace
}  // namespace zero
