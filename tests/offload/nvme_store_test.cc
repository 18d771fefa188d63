// The NVMe tier's file: aligned slots carved from a free list, bytes that
// survive a round trip, and a clear error for every way the file can fail
// (a folder that cannot hold it, a size limit mid-write, a file truncated or
// changed underneath), after which the store still works.
#include "offload/internal/nvme_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/direct_file.h"
#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

constexpr size_t kA = NvmeStore::kAlignment;

std::string TempFolder() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// An aligned buffer of `bytes` (padded) filled with a pattern from `seed`.
AlignedBuffer Pattern(size_t bytes, int seed) {
  AlignedBuffer buffer = *AllocateAlignedBuffer(NvmeStore::Padded(bytes));
  auto* p = reinterpret_cast<unsigned char*>(buffer.get());
  for (size_t i = 0; i < NvmeStore::Padded(bytes); ++i) p[i] = (i * 131 + seed * 7) & 0xFF;
  return buffer;
}

class NvmeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = NvmeStore::Create(TempFolder(), "store_test.swap");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::unique_ptr<NvmeStore> store_;
};

TEST_F(NvmeStoreTest, SlotsAreAlignedCarvedFirstFitAndCoalesced) {
  const uint64_t a = *store_->Allocate(1);
  const uint64_t b = *store_->Allocate(kA + 1);
  const uint64_t c = *store_->Allocate(kA);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, kA);
  EXPECT_EQ(c, 3 * kA);
  EXPECT_EQ(store_->stats().file_bytes, 4 * kA);
  ASSERT_TRUE(store_->Free(b).ok());
  EXPECT_EQ(*store_->Allocate(kA), kA) << "first fit in b's hole";
  ASSERT_TRUE(store_->Free(kA).ok());
  ASSERT_TRUE(store_->Free(a).ok());
  EXPECT_EQ(*store_->Allocate(3 * kA), 0u) << "a's and b's holes coalesced";
  ASSERT_TRUE(store_->Free(0).ok());
  ASSERT_TRUE(store_->Free(c).ok());
  EXPECT_EQ(store_->stats().file_bytes, 0u) << "a free tail shrinks the extent";
  EXPECT_EQ(store_->stats().slot_bytes, 0u);
  EXPECT_EQ(store_->Free(c).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NvmeStoreTest, BytesSurviveARoundTrip) {
  const size_t bytes = 3 * kA + 17;
  const uint64_t x = *store_->Allocate(bytes);
  const uint64_t y = *store_->Allocate(kA);
  AlignedBuffer in = Pattern(bytes, 1), other = Pattern(kA, 2);
  ASSERT_TRUE(store_->Write(x, in.get()).ok());
  ASSERT_TRUE(store_->Write(y, other.get()).ok());
  AlignedBuffer out = *AllocateAlignedBuffer(NvmeStore::Padded(bytes));
  ASSERT_TRUE(store_->Read(x, out.get()).ok());
  EXPECT_EQ(std::memcmp(in.get(), out.get(), bytes), 0);
  const NvmeStoreStats s = store_->stats();
  EXPECT_EQ(s.writes, 2u);
  EXPECT_EQ(s.reads, 1u);
  EXPECT_EQ(s.bytes_written, bytes + kA);
  EXPECT_EQ(s.bytes_read, bytes);
}

// The disk gives a freed tail back: a store that once held a large model
// must not keep its bytes until the run ends.
TEST_F(NvmeStoreTest, AFreedTailIsGivenBackToTheDisk) {
  const uint64_t head = *store_->Allocate(kA);
  const uint64_t tail = *store_->Allocate(4 * kA);
  AlignedBuffer a = Pattern(kA, 1), b = Pattern(4 * kA, 2);
  ASSERT_TRUE(store_->Write(head, a.get()).ok());
  ASSERT_TRUE(store_->Write(tail, b.get()).ok());
  auto on_disk = [&] {
    struct stat st;
    EXPECT_EQ(stat(store_->path().c_str(), &st), 0);
    return static_cast<uint64_t>(st.st_size);
  };
  ASSERT_EQ(on_disk(), 5 * kA);
  ASSERT_TRUE(store_->Free(tail).ok());
  EXPECT_EQ(on_disk(), kA) << "the freed tail still takes disk space";
  EXPECT_EQ(store_->stats().file_bytes, kA);
  AlignedBuffer back = Pattern(kA, 9);
  ASSERT_TRUE(store_->Read(head, back.get()).ok()) << "the head survives the truncate";
  EXPECT_EQ(std::memcmp(back.get(), a.get(), kA), 0);
}

// A writer that alternates between two halves of the file (the state
// file's fresh slot per pass) keeps both: giving the freed half back made
// the next pass extend the file again, write by write.
TEST_F(NvmeStoreTest, AFreedHalfIsKeptForTheNextPass) {
  const uint64_t first = *store_->Allocate(2 * kA);
  const uint64_t second = *store_->Allocate(2 * kA);
  AlignedBuffer a = Pattern(2 * kA, 1);
  ASSERT_TRUE(store_->Write(first, a.get()).ok());
  ASSERT_TRUE(store_->Write(second, a.get()).ok());
  ASSERT_TRUE(store_->Free(second).ok());
  EXPECT_EQ(store_->stats().file_bytes, 4 * kA) << "half the file was given back";
  EXPECT_EQ(*store_->Allocate(2 * kA), second) << "the next pass reuses the freed half";
  ASSERT_TRUE(store_->Free(first).ok());
  ASSERT_TRUE(store_->Free(second).ok());
  EXPECT_EQ(store_->stats().file_bytes, 0u) << "an empty store keeps no disk space";
}

TEST_F(NvmeStoreTest, ReadingANeverWrittenSlotIsAnError) {
  const uint64_t x = *store_->Allocate(kA);
  AlignedBuffer out = *AllocateAlignedBuffer(kA);
  absl::Status read = store_->Read(x, out.get());
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.message()), HasSubstr("holds no data"));
}

TEST_F(NvmeStoreTest, AFileChangedUnderneathIsDataLoss) {
  const uint64_t x = *store_->Allocate(2 * kA);
  AlignedBuffer in = Pattern(2 * kA, 3);
  ASSERT_TRUE(store_->Write(x, in.get()).ok());
  const int fd = open(store_->path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char flip = 0x5A;
  ASSERT_EQ(pwrite(fd, &flip, 1, kA + 5), 1);
  close(fd);
  AlignedBuffer out = *AllocateAlignedBuffer(2 * kA);
  absl::Status read = store_->Read(x, out.get());
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(read.message()), HasSubstr("changed underneath"));
  EXPECT_THAT(std::string(read.message()), HasSubstr(store_->path()));
  // In two steps (the state file's I/O thread reads, its caller checks):
  // the read succeeds and the check finds the change.
  absl::StatusOr<uint32_t> expected = store_->ReadUnchecked(x, out.get());
  ASSERT_TRUE(expected.ok()) << expected.status();
  absl::Status checked = store_->CheckRead(x, out.get(), *expected);
  EXPECT_EQ(checked.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(checked.message()), HasSubstr("changed underneath"));
  // Writing it again makes the slot good again.
  ASSERT_TRUE(store_->Write(x, in.get()).ok());
  EXPECT_TRUE(store_->Read(x, out.get()).ok());
}

TEST_F(NvmeStoreTest, AFileTruncatedUnderneathIsDataLoss) {
  const uint64_t x = *store_->Allocate(kA);
  const uint64_t y = *store_->Allocate(kA);
  AlignedBuffer in = Pattern(kA, 4);
  ASSERT_TRUE(store_->Write(x, in.get()).ok());
  ASSERT_TRUE(store_->Write(y, in.get()).ok());
  ASSERT_EQ(truncate(store_->path().c_str(), kA), 0);
  AlignedBuffer out = *AllocateAlignedBuffer(kA);
  EXPECT_TRUE(store_->Read(x, out.get()).ok()) << "what is left still reads";
  absl::Status read = store_->Read(y, out.get());
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(read.message()), HasSubstr("truncated"));
}

// A real short write: the process may not grow the file past 64 KiB, so the
// kernel fails the write with EFBIG (SIGXFSZ ignored). The slot then holds
// nothing valid, other slots are intact, and the store works once the
// limit is lifted.
TEST_F(NvmeStoreTest, AFileSizeLimitMidWriteIsAClearError) {
  const uint64_t small = *store_->Allocate(kA);
  const uint64_t large = *store_->Allocate(32 * kA);
  AlignedBuffer a = Pattern(kA, 5), b = Pattern(32 * kA, 6);
  ASSERT_TRUE(store_->Write(small, a.get()).ok());

  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = 16 * kA;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  absl::Status written = store_->Write(large, b.get());
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  signal(SIGXFSZ, old_handler);

  ASSERT_FALSE(written.ok());
  EXPECT_THAT(std::string(written.message()), HasSubstr(store_->path()));
  EXPECT_THAT(std::string(written.message()), HasSubstr("offset 4096"));
  EXPECT_FALSE(store_->written(large));
  AlignedBuffer out = *AllocateAlignedBuffer(32 * kA);
  EXPECT_EQ(store_->Read(large, out.get()).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->Read(small, out.get()).ok());
  EXPECT_EQ(std::memcmp(out.get(), a.get(), kA), 0);
  ASSERT_TRUE(store_->Write(large, b.get()).ok());
  ASSERT_TRUE(store_->Read(large, out.get()).ok());
  EXPECT_EQ(std::memcmp(out.get(), b.get(), 32 * kA), 0);
}

TEST_F(NvmeStoreTest, TheFaultHookFailsWritesLikeTheDisk) {
  int writes = 0;
  auto store = NvmeStore::Create(TempFolder(), "fault.swap", {.write_fault = [&](uint64_t, size_t) {
                                   return ++writes == 2 ? absl::ResourceExhaustedError("disk full")
                                                        : absl::OkStatus();
                                 }});
  ASSERT_TRUE(store.ok());
  const uint64_t x = *(*store)->Allocate(kA);
  AlignedBuffer in = Pattern(kA, 7);
  ASSERT_TRUE((*store)->Write(x, in.get()).ok());
  absl::Status second = (*store)->Write(x, in.get());
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(second.message()), HasSubstr("disk full"));
  EXPECT_FALSE((*store)->written(x));
}

// Padded(2^64 - 100) wraps to 0: that slot got offset 0 without growing
// the file, and the next slot got offset 0 too (two tensors, one place).
TEST_F(NvmeStoreTest, ASlotLargerThanAFileCanHoldIsRefused) {
  const absl::StatusOr<uint64_t> huge = store_->Allocate(~size_t{0} - 100);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument) << huge.status();
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("larger than a file can hold"));
  ASSERT_TRUE(store_->Allocate(NvmeStore::kMaxSlotBytes).ok());
  EXPECT_EQ(store_->Allocate(NvmeStore::kMaxSlotBytes).status().code(),
            absl::StatusCode::kResourceExhausted)
      << "a second slot of 2^62 would end past 2^63";
  EXPECT_EQ(*store_->Allocate(kA), NvmeStore::kMaxSlotBytes) << "the store still carves slots";
}

// The buffered open creates the file; a failing O_DIRECT reopen (here: no
// descriptor left) must not leave it behind as a stale one.
TEST(NvmeStoreCreateTest, AFailedCreateLeavesNoFileBehind) {
  const std::string folder = TempFolder() + "/failed_create";
  mkdir(folder.c_str(), 0755);
  const int probe = open("/dev/null", O_RDONLY);
  ASSERT_GE(probe, 0);
  close(probe);
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit one_more = saved;
  one_more.rlim_cur = probe + 1;  // room for the buffered descriptor only
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &one_more), 0);
  auto store = NvmeStore::Create(folder, "x.swap");
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("O_DIRECT"));
  struct stat st;
  EXPECT_NE(stat((folder + "/x.swap").c_str(), &st), 0) << "a stale file was left behind";
}

TEST(NvmeStoreCreateTest, AFolderThatCannotHoldTheFileIsAClearError) {
  auto missing = NvmeStore::Create(TempFolder() + "/no/such/folder", "x.swap");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/no/such/folder/x.swap"));
  // A regular file where the folder should be.
  const std::string file = TempFolder() + "/not_a_folder";
  close(open(file.c_str(), O_CREAT | O_WRONLY, 0644));
  auto not_folder = NvmeStore::Create(file, "x.swap");
  EXPECT_FALSE(not_folder.ok());
  EXPECT_THAT(std::string(not_folder.status().message()), HasSubstr("cannot create"));
  EXPECT_EQ(NvmeStore::Create("", "x.swap").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NvmeStoreCreateTest, TheFileIsRemovedWithTheStore) {
  std::string path;
  {
    auto store = NvmeStore::Create(TempFolder(), "removed.swap");
    ASSERT_TRUE(store.ok());
    path = (*store)->path();
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0);
  }
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

// Two stores asked for one name (processes with the same pid in two
// containers over one folder) get two files; neither truncates the other.
TEST(NvmeStoreCreateTest, AnExistingFileIsNeverTakenOver) {
  const std::string taken = TempFolder() + "/taken.swap";
  const int fd = open(taken.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "someone's", 9), 9);
  close(fd);
  auto first = NvmeStore::Create(TempFolder(), "taken.swap");
  auto second = NvmeStore::Create(TempFolder(), "taken.swap");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*first)->path(), taken + ".1");
  EXPECT_EQ((*second)->path(), taken + ".2");
  struct stat st;
  ASSERT_EQ(stat(taken.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 9) << "the existing file was truncated";
}

TEST(NvmeStoreMetaTest, BooksWithoutAFile) {
  const std::string folder = TempFolder() + "/meta_store";
  mkdir(folder.c_str(), 0755);
  auto store = NvmeStore::Create(folder, "meta.swap", {.has_bytes = false});
  ASSERT_TRUE(store.ok()) << store.status();
  struct stat st;
  EXPECT_NE(stat((*store)->path().c_str(), &st), 0) << "no file on meta devices";
  const uint64_t x = *(*store)->Allocate(size_t{1} << 40);
  ASSERT_TRUE((*store)->Write(x, nullptr).ok());
  ASSERT_TRUE((*store)->Read(x, nullptr).ok());
  EXPECT_EQ((*store)->stats().bytes_written, size_t{1} << 40);
  EXPECT_EQ((*store)->stats().file_bytes, size_t{1} << 40);
}

}  // namespace
}  // namespace zero
