// The data files a reader keeps open: a checkpoint from more ranks than
// that limit is read whole (from several threads at once) with no more
// files open, and a file opened again after it was closed is checked again.
#include "zero/checkpoint/internal/data_files.h"

#include <dirent.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/checkpoint/expect.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/verified_reader.h"

namespace zero::testing_model {
namespace {

using ::testing::HasSubstr;

int OpenDescriptors() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n;
}

class DataFilesTest : public ::testing::Test {
 protected:
  static constexpr int kWorld = 8;
  static constexpr int kMaxOpen = 2;

  void SetUp() override {
    model_ = SmallTransformer();
    auto cluster = Cluster::Create(*model_, SmallRun(kWorld, 3), AdamW());
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    ASSERT_TRUE((*cluster)->Train(0, 1).ok());
    const std::string root = FreshDir("data_files");
    ASSERT_TRUE(AllOk((*cluster)->Save(root)).ok());
    absl::StatusOr<std::string> folder = checkpoint::ResolveCheckpoint(root);
    ASSERT_TRUE(folder.ok()) << folder.status();
    folder_ = *folder;
    const std::string path = folder_ + "/" + checkpoint::kManifestName;
    absl::StatusOr<checkpoint::Manifest> manifest =
        checkpoint::ParseManifest(*checkpoint::ReadWholeFile(path), path);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    manifest_ = *std::move(manifest);
    ASSERT_EQ(manifest_.files.size(), size_t{kWorld});
  }

  // Reads and checks every chunk of every parameter through `files`,
  // parameter by parameter (so the files are visited over and over).
  absl::Status ReadEveryChunk(checkpoint::DataFiles& files, int& most_open) {
    for (const checkpoint::ParamRecord& p : manifest_.params) {
      for (const checkpoint::ChunkRecord& c : p.chunks) {
        absl::StatusOr<std::shared_ptr<DirectFile>> file = files.Get(c.file);
        if (!file.ok()) return file.status();
        std::vector<float> values(c.end - c.begin);
        if (absl::Status s = (*file)->ReadAt(c.offset, values.data(), values.size() * 4); !s.ok())
          return s;
        if (absl::Status s = checkpoint::CheckChunk((*file)->path(), p, c, values.data()); !s.ok())
          return s;
        most_open = std::max(most_open, files.open_now());
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Model> model_;
  std::string folder_;
  checkpoint::Manifest manifest_;
};

TEST_F(DataFilesTest, MoreFilesThanTheLimitAreReadWithFewOpen) {
  const int before = OpenDescriptors();
  checkpoint::DataFiles files(folder_, manifest_, kMaxOpen);
  constexpr int kThreads = 4;
  std::vector<absl::Status> status(kThreads);
  std::vector<int> most_open(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { status[t] = ReadEveryChunk(files, most_open[t]); });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(status[t].ok()) << status[t];
    EXPECT_LE(most_open[t], kMaxOpen);
  }
  EXPECT_GT(files.opens(), uint64_t{kWorld}) << "the files were visited over and over";
  // Two descriptors per open file (O_DIRECT and buffered), nothing leaked.
  EXPECT_LE(OpenDescriptors() - before, 2 * kMaxOpen);
}

TEST_F(DataFilesTest, AFileChangedWhileClosedIsCheckedWhenOpenedAgain) {
  checkpoint::DataFiles files(folder_, manifest_, 1);
  ASSERT_TRUE(files.Get(0).ok());
  ASSERT_TRUE(files.Get(1).ok());  // closes file 0
  const std::string path = folder_ + "/" + manifest_.files[0].name;
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(manifest_.files[0].bytes - 1)), 0);
  absl::StatusOr<std::shared_ptr<DirectFile>> again = files.Get(0);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(again.status().message(), HasSubstr(manifest_.files[0].name));
  EXPECT_THAT(again.status().message(), HasSubstr("truncated"));
  EXPECT_TRUE(files.Get(1).ok()) << "the others still read";
}

TEST_F(DataFilesTest, AMissingFileIsNotFound) {
  checkpoint::DataFiles files(folder_, manifest_);
  const std::string path = folder_ + "/" + manifest_.files[3].name;
  ASSERT_EQ(unlink(path.c_str()), 0);
  absl::StatusOr<std::shared_ptr<DirectFile>> file = files.Get(3);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr(manifest_.files[3].name));
}

}  // namespace
}  // namespace zero::testing_model
