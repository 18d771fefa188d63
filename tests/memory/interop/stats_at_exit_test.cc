// libzero_allocator.so itself, loaded by a separate process (tests/memory/
// interop/load_library_main.cc): it exports the C functions, reads its
// configuration from the environment and writes its statistics at exit.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& path) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/" + std::getenv("TEST_WORKSPACE") + "/" + path;
}

// Runs the loader with the current environment; returns its exit status.
int RunLoader() {
  const std::string loader = Runfile("tests/memory/interop/load_library");
  const std::string library = Runfile("memory/interop/libzero_allocator.so");
  char* argv[] = {const_cast<char*>(loader.c_str()), const_cast<char*>(library.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, loader.c_str(), nullptr, nullptr, argv, environ) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(StatsAtExitTest, LibraryWritesItsStatisticsWhenTheProcessExits) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/zero_stats.json";
  std::remove(path.c_str());
  setenv("ZERO_DEVICES", "host:2x64MiB", 1);
  setenv("ZERO_ALLOCATOR_CAP", "8MiB", 1);
  setenv("ZERO_ALLOCATOR_STATS", path.c_str(), 1);
  ASSERT_EQ(RunLoader(), 0);
  const std::string json = ReadFile(path);
  EXPECT_THAT(json, HasSubstr("\"kind\":\"host\",\"cap\":8388608,"));
  EXPECT_THAT(json, HasSubstr("\"invalid_size\":1,"));
  // Device 1: two allocations, one freed, 4096 bytes still live at exit.
  EXPECT_THAT(json, HasSubstr("\"device\":1,"));
  EXPECT_THAT(json, HasSubstr("\"requested\":4096,"));
  EXPECT_THAT(json, HasSubstr("\"num_allocs\":2,\"num_frees\":1,"));
  EXPECT_THAT(json, HasSubstr("\"cap_used\":4096}"));
}

TEST(StatsAtExitTest, WithoutTheVariableNoFileAppears) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/none.json";
  setenv("ZERO_DEVICES", "host:2x64MiB", 1);
  unsetenv("ZERO_ALLOCATOR_CAP");
  unsetenv("ZERO_ALLOCATOR_STATS");
  ASSERT_EQ(RunLoader(), 0);
  EXPECT_EQ(access(path.c_str(), F_OK), -1);
}

// The exception crosses the library's boundary (its C++ symbols are hidden,
// std::bad_alloc's type is the C++ runtime's): the loader catches it.
TEST(StatsAtExitTest, OutOfMemoryThrowsAcrossTheLibraryWhenAsked) {
  setenv("ZERO_DEVICES", "host:2x64MiB", 1);
  unsetenv("ZERO_ALLOCATOR_CAP");
  unsetenv("ZERO_ALLOCATOR_STATS");
  setenv("ZERO_ALLOCATOR_OOM", "throw", 1);
  EXPECT_EQ(RunLoader(), 0) << "9: no exception reached the loader";
  unsetenv("ZERO_ALLOCATOR_OOM");
}

TEST(StatsAtExitTest, BadConfigurationFailsEveryCallButLoads) {
  setenv("ZERO_DEVICES", "tpu", 1);
  unsetenv("ZERO_ALLOCATOR_STATS");
  EXPECT_EQ(RunLoader(), 6) << "zero_malloc returns null, nothing crashes";
}

}  // namespace
