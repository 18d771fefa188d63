// Optimizer state on NVMe: planes start zeroed, survive any pass bit for
// bit, the pipelined update equals the same update in memory, a partial
// write keeps the rest of its chunks, and a pass that fails (disk full, a
// file changed underneath) leaves the range as it was.
#include "offload/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "offload/host_pool.h"

namespace zero {
namespace {

using ::testing::HasSubstr;
using Pass = StateFile::Pass;

constexpr int kPlanes = 3;
constexpr size_t kChunk = 1000;  // not a multiple of the file's alignment

std::string Folder() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

float Value(int plane, size_t i, int seed) { return plane * 1e6f + i + seed * 0.25f; }

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 16 * kMiB});
    host_ = *PinnedHostPool::Create(system_.get(), 64 * kMiB, {.arena_bytes = 16 * kMiB});
    MakeFile({});
  }
  void MakeFile(std::function<absl::Status(uint64_t, size_t)> fault,
                std::vector<size_t> ranges = {2500, 10, 4000}, size_t chunk = kChunk) {
    file_.reset();
    auto file = StateFile::Create(kPlanes, std::move(ranges), host_.get(),
                                  {.folder = Folder(), .chunk_elements = chunk,
                                   .write_fault = std::move(fault)});
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
  }
  // Every plane of `range` as the file holds it.
  std::vector<std::vector<float>> ReadAll(int range) {
    std::vector<std::vector<float>> out(kPlanes, std::vector<float>(file_->range_elements(range)));
    absl::Status s = file_->Run(range, Pass::kRead, [&](size_t at, size_t n, auto planes) {
      for (int p = 0; p < kPlanes; ++p) std::copy(planes[p], planes[p] + n, out[p].begin() + at);
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  absl::Status Fill(int range, size_t begin, size_t count, int seed) {
    return file_->Run(range, begin, count, Pass::kWrite, [&](size_t at, size_t n, auto planes) {
      for (int p = 0; p < kPlanes; ++p) {
        for (size_t i = 0; i < n; ++i) planes[p][i] = Value(p, at + i, seed);
      }
      return absl::OkStatus();
    });
  }
  // Elements [begin, begin + count) of `plane` hold Value(plane, i, seed(i)).
  bool Matches(int range, size_t begin, size_t count, int plane,
               const std::function<int(size_t)>& seed) {
    absl::Status s = file_->Run(range, begin, count, Pass::kRead, [&](size_t at, size_t n, auto p) {
      for (size_t i = at; i < at + n; ++i) {
        if (p[plane][i - at] != Value(plane, i, seed(i))) {
          return absl::DataLossError("plane " + std::to_string(plane) + " element " +
                                     std::to_string(i));
        }
      }
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
    return s.ok();
  }
  bool Holds(int range, int seed) {
    const auto all = ReadAll(range);
    for (int p = 0; p < kPlanes; ++p) {
      for (size_t i = 0; i < all[p].size(); ++i) {
        if (all[p][i] != Value(p, i, seed)) return false;
      }
    }
    return true;
  }

  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<PinnedHostPool> host_;
  std::unique_ptr<StateFile> file_;
};

// A chunk whose bytes would wrap around size_t would get a tiny staging
// buffer and then a read of the whole range into it: refused at creation.
TEST_F(StateFileTest, ChunksTooLargeToAddressAreRefused) {
  const size_t huge = (size_t{1} << 62) + 1;  // x 3 planes x 4 bytes wraps to 12
  auto file = StateFile::Create(kPlanes, {6000}, host_.get(),
                                {.folder = Folder(), .chunk_elements = huge});
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("do not fit in memory"));
}

// Five buffers of planes x the default chunk (4M elements: 240 MiB) for a
// state of 30 elements failed a small model's engine on its host pool.
TEST_F(StateFileTest, StagingIsNoLargerThanTheLongestRangeNeeds) {
  file_.reset();
  auto file = StateFile::Create(kPlanes, {10, 20}, host_.get(), {.folder = Folder()});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->stats().staging_bytes,
            StateFile::kStagingBuffers * NvmeStore::Padded(kPlanes * 20 * sizeof(float)));
  file_ = std::move(*file);
  ASSERT_TRUE(Fill(1, 0, 20, 3).ok());
  EXPECT_TRUE(Matches(1, 0, 20, 2, [](size_t) { return 3; }));
}

TEST_F(StateFileTest, PlanesStartZeroedAndSurviveWritesBitForBit) {
  for (const auto& plane : ReadAll(2)) {
    for (float v : plane) ASSERT_EQ(v, 0.0f);
  }
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(Fill(r, 0, file_->range_elements(r), r + 1).ok());
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(Holds(r, r + 1)) << "range " << r;
  const StateFileStats s = file_->stats();
  EXPECT_EQ(s.state_bytes, kPlanes * 6510 * sizeof(float));
  EXPECT_EQ(s.staging_bytes, StateFile::kStagingBuffers * NvmeStore::Padded(kPlanes * kChunk * sizeof(float)));
  EXPECT_LE(host_->stats().requested, s.staging_bytes) << "host memory: the staging only";
}

TEST_F(StateFileTest, APartialWriteKeepsTheRestOfItsChunks) {
  ASSERT_TRUE(Fill(0, 0, 2500, 1).ok());
  ReadAll(2);  // the staging buffers now hold other chunks
  ASSERT_TRUE(Fill(0, 900, 1200, 2).ok());  // parts of chunks 0 and 2, all of 1
  const auto all = ReadAll(0);
  for (int p = 0; p < kPlanes; ++p) {
    for (size_t i = 0; i < 2500; ++i) {
      const int seed = i >= 900 && i < 2100 ? 2 : 1;
      ASSERT_EQ(all[p][i], Value(p, i, seed)) << "plane " << p << " element " << i;
    }
  }
}

TEST_F(StateFileTest, ThePipelinedUpdateEqualsTheUpdateInMemory) {
  ASSERT_TRUE(Fill(2, 0, 4000, 3).ok());
  const uint64_t read_before = file_->stats().bytes_read;
  const uint64_t written_before = file_->stats().bytes_written;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(file_->Run(2, Pass::kUpdate, [](size_t at, size_t n, auto planes) {
      for (size_t i = 0; i < n; ++i) {
        planes[1][i] = planes[1][i] * 0.5f + planes[0][i];
        planes[2][i] += planes[1][i] * 1e-3f + float(at + i);
        planes[0][i] -= planes[2][i] * 1e-4f;
      }
      return absl::OkStatus();
    }).ok());
  }
  const uint64_t bytes = kPlanes * 4000 * sizeof(float);
  EXPECT_EQ(file_->stats().bytes_read - read_before, 3 * bytes) << "each pass reads it once";
  EXPECT_EQ(file_->stats().bytes_written - written_before, 3 * bytes) << "and writes it once";
  std::vector<float> m(4000), a(4000), b(4000);
  for (size_t i = 0; i < 4000; ++i) m[i] = Value(0, i, 3), a[i] = Value(1, i, 3), b[i] = Value(2, i, 3);
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < 4000; ++i) {
      a[i] = a[i] * 0.5f + m[i];
      b[i] += a[i] * 1e-3f + float(i);
      m[i] -= b[i] * 1e-4f;
    }
  }
  const auto all = ReadAll(2);
  EXPECT_EQ(all[0], m);
  EXPECT_EQ(all[1], a);
  EXPECT_EQ(all[2], b);
}

// A checkpoint reads a few elements of one plane at a time: chunks still in
// staging are not read again, and give what the file holds.
TEST_F(StateFileTest, ReadsTakeChunksStillInStaging) {
  constexpr size_t kChunks = 20;  // more than the staging buffers
  constexpr size_t kElements = kChunks * kChunk;
  MakeFile({}, {kElements});
  ASSERT_TRUE(Fill(0, 0, kElements, 4).ok());
  const uint64_t chunk_bytes = kPlanes * kChunk * sizeof(float);
  const uint64_t before = file_->stats().bytes_read;
  auto four = [](size_t) { return 4; };
  for (size_t at = 0; at < kElements; at += 300) {  // windows across chunk borders
    for (int p = 0; p < kPlanes; ++p) {
      ASSERT_TRUE(Matches(0, at, std::min<size_t>(300, kElements - at), p, four));
    }
  }
  const uint64_t read = file_->stats().bytes_read - before;
  EXPECT_LE(read, kChunks * chunk_bytes) << "no chunk read twice";
  EXPECT_GE(read, (kChunks - StateFile::kStagingBuffers) * chunk_bytes)
      << "only what the write left in staging was not read";
  // Whole passes reuse every buffer: one holds what the pass put there last,
  // not what it held before.
  EXPECT_TRUE(Holds(0, 4));
  EXPECT_TRUE(Holds(0, 4));
  // The write of chunk 16 goes through another buffer than the one holding
  // it from the last pass: that copy is old now.
  ASSERT_TRUE(Fill(0, 16 * kChunk, 10, 6).ok());
  for (int p = 0; p < kPlanes; ++p) {
    EXPECT_TRUE(Matches(0, 16 * kChunk, 2 * kChunk, p,
                        [](size_t i) { return i < 16 * kChunk + 10 ? 6 : 4; }));
  }
}

// A writing pass takes each chunk's CRC block by block as it writes (never
// reading the chunk again): whole, partial and updated chunks, read back
// from the file (not from staging), pass their checks and hold what was
// written.
TEST_F(StateFileTest, ChecksumsTakenWhileWritingHoldWhenReadBack) {
  constexpr size_t kBig = 150000;  // several checksum blocks per chunk
  MakeFile({}, {2 * kBig + 500, 6 * kBig}, kBig);
  ASSERT_TRUE(Fill(0, 0, 2 * kBig + 500, 1).ok());
  ASSERT_TRUE(Fill(0, 1000, kBig + 7000, 2).ok());  // the tail of chunk 0, the head of 1
  ASSERT_TRUE(file_->Run(0, kBig - 3, 70000, Pass::kUpdate, [](size_t, size_t n, auto planes) {
    for (size_t i = 0; i < n; ++i) planes[1][i] += 0.5f;
    return absl::OkStatus();
  }).ok());
  ASSERT_TRUE(Fill(1, 0, 6 * kBig, 3).ok());  // more chunks than staging buffers
  const uint64_t before = file_->stats().bytes_read;
  const auto all = ReadAll(0);
  EXPECT_EQ(file_->stats().bytes_read - before, kPlanes * (2 * kBig + 500) * sizeof(float))
      << "read from the file, every chunk checked";
  for (int p = 0; p < kPlanes; ++p) {
    for (size_t i = 0; i < all[p].size(); ++i) {
      const float bump = p == 1 && i >= kBig - 3 && i < kBig + 69997 ? 0.5f : 0.0f;
      ASSERT_EQ(all[p][i], Value(p, i, i >= 1000 && i < kBig + 8000 ? 2 : 1) + bump)
          << "plane " << p << " element " << i;
    }
  }
}

TEST_F(StateFileTest, AFailedWriteLeavesTheRangeAsItWas) {
  // Writes run on the pipeline's threads, two at a time.
  std::atomic<int> writes{0};
  std::atomic<bool> full{false};
  MakeFile([&](uint64_t, size_t) {
    return ++writes % 3 == 0 && full ? absl::ResourceExhaustedError("no space left (injected)")
                                   : absl::OkStatus();
  });
  ASSERT_TRUE(Fill(2, 0, 4000, 5).ok());
  full = true;
  absl::Status s = Fill(2, 0, 4000, 6);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr(file_->path()));
  full = false;
  EXPECT_TRUE(Holds(2, 5)) << "the old slots stay until a whole pass succeeded";
  ASSERT_TRUE(Fill(2, 0, 4000, 6).ok());
  EXPECT_TRUE(Holds(2, 6));
}

TEST_F(StateFileTest, AFileChangedUnderneathIsDataLoss) {
  ASSERT_TRUE(Fill(0, 0, 2500, 7).ok());
  const int fd = open(file_->path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::vector<char> junk(64, 0x55);
  const off_t size = lseek(fd, 0, SEEK_END);
  for (off_t at = 0; at + 64 <= size; at += 4096) ASSERT_EQ(pwrite(fd, junk.data(), 64, at), 64);
  close(fd);
  absl::Status s = file_->Run(0, Pass::kUpdate, [](size_t, size_t, auto) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("changed underneath"));
}

TEST_F(StateFileTest, BadRangesAreClearErrors) {
  auto nothing = [](size_t, size_t, auto) { return absl::OkStatus(); };
  absl::Status s = file_->Run(1, 5, 6, Pass::kRead, nothing);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("that one has 10 elements"));
  EXPECT_EQ(file_->Run(3, Pass::kRead, nothing).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file_->Run(-1, Pass::kRead, nothing).code(), absl::StatusCode::kInvalidArgument);
  auto stopped = file_->Run(0, Pass::kUpdate, [](size_t, size_t, auto) {
    return absl::InternalError("stop");
  });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(StateFile::Create(0, {1}, host_.get(), {.folder = Folder()}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(StateFile::Create(1, {1}, host_.get(), {.folder = Folder() + "/no/such"}).ok());
}

TEST(StateFileMetaTest, BooksOnly) {
  auto file = StateFile::Create(3, {size_t{1} << 33}, nullptr,
                                {.folder = "/nonexistent-on-meta", .has_bytes = false});
  ASSERT_TRUE(file.ok()) << file.status();
  int calls = 0;
  ASSERT_TRUE((*file)->Run(0, StateFile::Pass::kUpdate, [&](size_t, size_t, auto) {
    ++calls;
    return absl::OkStatus();
  }).ok());
  EXPECT_EQ(calls, 0) << "no bytes to hand over";
  EXPECT_EQ((*file)->stats().state_bytes, 3 * (size_t{1} << 35));
  EXPECT_EQ((*file)->stats().bytes_read, 3 * (size_t{1} << 35));
}

}  // namespace
}  // namespace zero
