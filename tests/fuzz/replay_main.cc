// Replays fuzzer inputs through LLVMFuzzerTestOneInput without libFuzzer:
// every argument is a file or a folder of files (the seed corpus and the
// inputs that once crashed). A crash, a sanitizer report or an abort fails
// the test; the file being replayed is printed first, so the log names it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

std::vector<std::string>& Inputs() {
  static std::vector<std::string> inputs;
  return inputs;
}

std::vector<std::filesystem::path> FilesOf(const std::string& arg) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(arg)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(arg)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
  } else {
    files.emplace_back(arg);
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(FuzzReplay, EveryInputRunsClean) {
  ASSERT_FALSE(Inputs().empty()) << "no corpus folder or file given";
  size_t replayed = 0;
  for (const std::string& arg : Inputs()) {
    for (const std::filesystem::path& file : FilesOf(arg)) {
      std::ifstream in(file, std::ios::binary);
      ASSERT_TRUE(in) << "cannot read " << file;
      const std::string bytes{std::istreambuf_iterator<char>(in), {}};
      std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u) << "the corpus is empty";
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; ++i) Inputs().push_back(argv[i]);
  return RUN_ALL_TESTS();
}
