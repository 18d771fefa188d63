// DirectFile: both modes, unaligned heads, tails and buffers against an
// in-memory image, a file that ends early, a filesystem that refuses
// O_DIRECT, and errors that name the file.
#include "base/direct_file.h"

#include <sys/vfs.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

class DirectFileModes : public ::testing::TestWithParam<bool> {};

TEST_P(DirectFileModes, AlignedRoundTrip) {
  const std::string path = TempPath(absl::StrCat("aligned_", GetParam()));
  auto file = DirectFile::Open(path, FileMode::kWrite, {.direct = GetParam()});
  ASSERT_TRUE(file.ok()) << file.status();
  if (!GetParam()) {
    EXPECT_FALSE(file->direct());
  }
  // ext4 and xfs take O_DIRECT: there the direct path must be in effect.
  struct statfs fs;
  constexpr long kExt4 = 0xEF53, kXfs = 0x58465342;
  if (GetParam() && statfs(path.c_str(), &fs) == 0 && (fs.f_type == kExt4 || fs.f_type == kXfs)) {
    EXPECT_TRUE(file->direct());
  }
  const size_t bytes = 16 * DirectFile::kAlignment;
  auto out = AllocateAlignedBuffer(bytes);
  auto in = AllocateAlignedBuffer(bytes);
  ASSERT_TRUE(out.ok() && in.ok());
  for (size_t i = 0; i < bytes; ++i) (*out)[i] = std::byte(i * 7 + 3);
  ASSERT_TRUE(file->WriteAt(DirectFile::kAlignment, out->get(), bytes).ok());
  ASSERT_TRUE(file->Sync().ok());
  EXPECT_EQ(*file->Size(), bytes + DirectFile::kAlignment);

  auto reader = DirectFile::Open(path, FileMode::kRead, {.direct = GetParam()});
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE(reader->ReadAt(DirectFile::kAlignment, in->get(), bytes).ok());
  EXPECT_EQ(std::memcmp(in->get(), out->get(), bytes), 0);
}

// Random writes and reads at every kind of misalignment (offset, size, and
// the buffer's address) agree with a plain in-memory image of the file.
TEST_P(DirectFileModes, UnalignedMatchesAnImage) {
  const std::string path = TempPath(absl::StrCat("unaligned_", GetParam()));
  auto file = DirectFile::Open(path, FileMode::kReadWrite, {.direct = GetParam()});
  ASSERT_TRUE(file.ok()) << file.status();
  constexpr size_t kFile = 20 * DirectFile::kAlignment;
  std::vector<char> image(kFile, 0);
  ASSERT_TRUE(file->WriteAt(0, image.data(), kFile).ok());
  auto scratch = AllocateAlignedBuffer(kFile + 2 * DirectFile::kAlignment);
  ASSERT_TRUE(scratch.ok());
  char* base = reinterpret_cast<char*>(scratch->get());
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    const size_t offset = round % 3 == 0 ? rng() % 8 * DirectFile::kAlignment : rng() % kFile;
    const size_t bytes =
        round % 5 == 0 ? (1 + rng() % 4) * DirectFile::kAlignment : rng() % (kFile - offset + 1);
    const size_t clamped = std::min(bytes, kFile - offset);
    // Buffer shifted like the offset (direct middle possible) or not.
    char* buffer = base + (round % 2 == 0 ? offset % DirectFile::kAlignment : 1 + rng() % 100);
    if (round % 4 < 2) {
      for (size_t i = 0; i < clamped; ++i) buffer[i] = static_cast<char>(rng());
      ASSERT_TRUE(file->WriteAt(offset, buffer, clamped).ok());
      std::memcpy(image.data() + offset, buffer, clamped);
    } else {
      ASSERT_TRUE(file->ReadAt(offset, buffer, clamped).ok()) << offset << " " << clamped;
      ASSERT_EQ(std::memcmp(buffer, image.data() + offset, clamped), 0)
          << "round " << round << " offset " << offset << " bytes " << clamped;
    }
  }
  std::vector<char> whole(kFile);
  ASSERT_TRUE(file->ReadAt(0, whole.data(), kFile).ok());
  EXPECT_EQ(whole, image);
}

// A file that ends inside the request, at an aligned request (the direct
// read comes back short) and at an unaligned one.
TEST_P(DirectFileModes, ShortFileIsOutOfRangeNamingIt) {
  const std::string path = TempPath(absl::StrCat("short_", GetParam()));
  {
    auto file = DirectFile::Open(path, FileMode::kWrite, {.direct = GetParam()});
    ASSERT_TRUE(file.ok());
    const std::string data(5000, 'x');
    ASSERT_TRUE(file->WriteAt(0, data.data(), data.size()).ok());
  }
  auto file = DirectFile::Open(path, FileMode::kRead, {.direct = GetParam()});
  ASSERT_TRUE(file.ok());
  auto buffer = AllocateAlignedBuffer(3 * DirectFile::kAlignment);
  ASSERT_TRUE(buffer.ok());
  for (uint64_t offset : {uint64_t{0}, uint64_t{100}, uint64_t{DirectFile::kAlignment}}) {
    const absl::Status status = file->ReadAt(offset, buffer->get(), 2 * DirectFile::kAlignment);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr("ends at 5000"));
  }
  ASSERT_TRUE(file->ReadAt(4000, buffer->get(), 1000).ok());  // exactly to the end
}

INSTANTIATE_TEST_SUITE_P(DirectAndBuffered, DirectFileModes, ::testing::Bool());

// tmpfs refused O_DIRECT before Linux 6.6: there the file opens buffered
// and works the same. Newer kernels take it, and then this checks tmpfs's.
TEST(DirectFile, TmpfsWorksDirectOrNot) {
  struct statfs fs;
  constexpr long kTmpfsMagic = 0x01021994;
  if (statfs("/dev/shm", &fs) != 0 || fs.f_type != kTmpfsMagic) {
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  }
  const std::string path = absl::StrCat("/dev/shm/direct_file_test_", getpid());
  auto file = DirectFile::Open(path, FileMode::kWrite);
  ASSERT_TRUE(file.ok()) << file.status();
  std::printf("tmpfs O_DIRECT: %s\n", file->direct() ? "taken" : "refused, buffered");
  auto buffer = AllocateAlignedBuffer(DirectFile::kAlignment);
  ASSERT_TRUE(buffer.ok());
  std::memset(buffer->get(), 0x5a, DirectFile::kAlignment);
  EXPECT_TRUE(file->WriteAt(0, buffer->get(), DirectFile::kAlignment).ok());
  std::memset(buffer->get(), 0, DirectFile::kAlignment);
  EXPECT_TRUE(file->ReadAt(0, buffer->get(), DirectFile::kAlignment).ok());
  EXPECT_EQ((*buffer)[4095], std::byte{0x5a});
  unlink(path.c_str());
}

TEST(DirectFile, ErrorsNameThePathAndOffset) {
  const std::string missing = TempPath("no/such/file");
  auto absent = DirectFile::Open(missing, FileMode::kRead);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(absent.status().message(), HasSubstr(missing));

  const std::string path = TempPath("read_only");
  ASSERT_TRUE(DirectFile::Open(path, FileMode::kWrite).ok());
  auto file = DirectFile::Open(path, FileMode::kRead);
  ASSERT_TRUE(file.ok());
  const std::string data(100, 'y');
  const absl::Status status = file->WriteAt(12345, data.data(), data.size());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("offset 12345"));
}

TEST(DirectFile, TruncateAndMove) {
  const std::string path = TempPath("truncate");
  auto file = DirectFile::Open(path, FileMode::kWrite);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(file->Truncate(3 * DirectFile::kAlignment + 7).ok());
  EXPECT_EQ(*file->Size(), 3 * DirectFile::kAlignment + 7);
  DirectFile moved = std::move(*file);
  EXPECT_EQ(moved.path(), path);
  ASSERT_TRUE(moved.Truncate(10).ok());
  EXPECT_EQ(*moved.Size(), 10u);
  // kReadWrite keeps what is there; kWrite truncates.
  EXPECT_EQ(*DirectFile::Open(path, FileMode::kReadWrite)->Size(), 10u);
  EXPECT_EQ(*DirectFile::Open(path, FileMode::kWrite)->Size(), 0u);
}

TEST(AlignedBuffer, IsAligned) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{5000}}) {
    auto buffer = AllocateAlignedBuffer(bytes);
    ASSERT_TRUE(buffer.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->get()) % DirectFile::kAlignment, 0u);
  }
  EXPECT_EQ(RoundUpToAlignment(1), DirectFile::kAlignment);
  EXPECT_EQ(RoundUpToAlignment(DirectFile::kAlignment), DirectFile::kAlignment);
}

}  // namespace
}  // namespace zero
