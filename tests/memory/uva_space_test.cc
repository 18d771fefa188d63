// The UVA space's chunked mapping, its rollback and its reserve, through a
// host backend that counts every step and fails one on command.
#include "memory/uva_space.h"

#include <memory>
#include <string>

#include "base/units.h"
#include "gtest/gtest.h"
#include "memory/pool.h"
#include "memory/simulated_backend.h"
#include "tests/memory/failing_backend.h"

namespace zero {
namespace {

using testing::FailingBackend;
using testing::Step;

// Two host devices of 64 MiB with 8 MiB chunks, a pool on device 0.
class ChunkedSpaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = std::make_unique<FailingBackend>(std::make_unique<HostBackend>(2, 64 * kMiB));
    space_ = *UvaSpace::Create(backend_.get(), {.chunk = 8 * kMiB});
    stream_ = *backend_->CreateStream(0);
    pool_ = std::make_unique<DevicePool>(0, space_.get(), stream_.get());
  }
  void TearDown() override {
    pool_.reset();
    EXPECT_EQ(space_->mapped_bytes(0), 0u);
    EXPECT_TRUE(backend_->mappings().empty());
  }

  std::unique_ptr<FailingBackend> backend_;
  std::unique_ptr<UvaSpace> space_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<DevicePool> pool_;
};

TEST_F(ChunkedSpaceTest, MapsWholeChunksAndGrantsAccessOncePerRun) {
  absl::StatusOr<void*> p = pool_->Allocate(20 * kMiB);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(space_->mapped_bytes(0), 24 * kMiB);
  EXPECT_EQ(backend_->calls(Step::kCreate), 3);
  EXPECT_EQ(backend_->calls(Step::kMap), 3);
  EXPECT_EQ(backend_->calls(Step::kSetAccess), 1);
  EXPECT_EQ(backend_->calls(Step::kRelease), 3);
  EXPECT_TRUE(backend_->live_handles().empty()) << "a mapping holds its memory alone";
  EXPECT_EQ(backend_->last_access(), (std::vector<int>{0, 1})) << "the space's devices only";
  static_cast<char*>(*p)[20 * kMiB - 1] = 1;  // access granted: writable
  ASSERT_TRUE(pool_->Deallocate(*p, 20 * kMiB).ok());
  EXPECT_EQ(*pool_->Trim(), 24 * kMiB);
  EXPECT_EQ(backend_->calls(Step::kUnmap), 3) << "one unmap per chunk";
  EXPECT_EQ(space_->mapped_bytes(0), 0u);
}

TEST_F(ChunkedSpaceTest, RejectsRangesThatAreNotWholeChunks) {
  const uintptr_t base = space_->slice_begin(0);
  EXPECT_EQ(space_->Map(0, base, 2 * kMiB).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(space_->Map(0, base + 2 * kMiB, 8 * kMiB).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->calls(Step::kCreate), 0);
}

// A failure at any step of mapping leaves nothing mapped or held, and the
// books as before: the same request then succeeds.
std::string StepName(const ::testing::TestParamInfo<Step>& info) {
  constexpr const char* kNames[] = {"create", "map", "set_access", "unmap", "release"};
  return kNames[static_cast<int>(info.param)];
}

class RollbackTest : public ChunkedSpaceTest, public ::testing::WithParamInterface<Step> {};

TEST_P(RollbackTest, FailedMappingIsUndoneInFull) {
  // The second call, so that some chunks are done when it fails (set access
  // is called once per run).
  backend_->FailAt(GetParam(), GetParam() == Step::kSetAccess ? 1 : 2);
  absl::StatusOr<void*> failed = pool_->Allocate(30 * kMiB);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("on command"), std::string::npos) << failed.status();
  EXPECT_TRUE(backend_->mappings().empty());
  EXPECT_EQ(space_->mapped_bytes(0), 0u);
  EXPECT_EQ(pool_->stats().reserved, 0u);
  // A handle whose release itself failed is the driver's to keep.
  EXPECT_EQ(backend_->live_handles().size(), GetParam() == Step::kRelease ? 1u : 0u);

  absl::StatusOr<void*> p = pool_->Allocate(30 * kMiB);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(space_->mapped_bytes(0), 32 * kMiB);
  ASSERT_TRUE(pool_->Deallocate(*p, 30 * kMiB).ok());
}

INSTANTIATE_TEST_SUITE_P(EveryMappingStep, RollbackTest,
                         ::testing::Values(Step::kCreate, Step::kMap, Step::kSetAccess,
                                           Step::kRelease),
                         StepName);

TEST_F(ChunkedSpaceTest, FailedRollbackSaysWhatStaysMapped) {
  backend_->FailAt(Step::kSetAccess);
  backend_->FailAt(Step::kUnmap, 2);
  const uintptr_t base = space_->slice_begin(0);
  absl::Status status = space_->Map(0, base, 24 * kMiB);
  EXPECT_NE(status.message().find("left 16.00 MiB mapped"), std::string::npos) << status;
  EXPECT_EQ(space_->mapped_bytes(0), 16 * kMiB) << "counts what really is mapped";
  EXPECT_EQ(backend_->mappings().size(), 2u);
  ASSERT_TRUE(space_->Unmap(0, base + 8 * kMiB, 16 * kMiB).ok());
}

TEST_F(ChunkedSpaceTest, FailedUnmapBooksThePartGivenBack) {
  absl::StatusOr<void*> p = pool_->Allocate(32 * kMiB);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(pool_->Deallocate(*p, 32 * kMiB).ok());
  backend_->FailAt(Step::kUnmap, 3);
  EXPECT_FALSE(pool_->Trim().ok());
  EXPECT_EQ(space_->mapped_bytes(0), 16 * kMiB);
  EXPECT_EQ(backend_->mappings().size(), 2u);
  EXPECT_EQ(pool_->stats().reserved, 16 * kMiB) << "the pool's books match the space's";
  // What stayed mapped is still a usable free block.
  absl::StatusOr<void*> q = pool_->Allocate(16 * kMiB);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(space_->mapped_bytes(0), 16 * kMiB);
  static_cast<char*>(*q)[0] = 1;
  ASSERT_TRUE(pool_->Deallocate(*q, 16 * kMiB).ok());
  EXPECT_EQ(*pool_->Trim(), 16 * kMiB);
}

TEST(UvaSpaceReserveTest, CapacityIsWhatIsLeftInWholeChunks) {
  HostBackend backend(1, 64 * kMiB);
  auto bytes = UvaSpace::Create(&backend, {.reserve = MemoryReserve{.bytes = 16 * kMiB}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)->capacity(0), 48 * kMiB);
  auto fraction = UvaSpace::Create(&backend, {.reserve = MemoryReserve{.fraction = 0.25}});
  EXPECT_EQ((*fraction)->capacity(0), 48 * kMiB);
  auto chunked = UvaSpace::Create(&backend, {.chunk = 32 * kMiB, .reserve = MemoryReserve{.bytes = 2 * kMiB}});
  EXPECT_EQ((*chunked)->capacity(0), 32 * kMiB) << "rounded down to whole chunks";
  EXPECT_EQ((*chunked)->Map(0, (*chunked)->slice_begin(0), 64 * kMiB).code(),
            absl::StatusCode::kResourceExhausted);
}

// Cards keep 2 GiB free unless told otherwise (NCCL, cuBLAS and CUDA's own
// pool allocate outside ours); an explicit reserve, zero included, wins.
TEST(UvaSpaceReserveTest, UnsetTakesTheBackendsDefaultAndZeroMeansNone) {
  FailingBackend backend(std::make_unique<HostBackend>(1, 64 * kMiB));
  EXPECT_EQ((*UvaSpace::Create(&backend))->capacity(0), 64 * kMiB) << "host: no reserve";
  backend.set_default_reserve({.bytes = 16 * kMiB});
  EXPECT_EQ((*UvaSpace::Create(&backend))->capacity(0), 48 * kMiB);
  EXPECT_EQ((*UvaSpace::Create(&backend, {.reserve = MemoryReserve{}}))->capacity(0), 64 * kMiB);
  EXPECT_EQ((*UvaSpace::Create(&backend, {.reserve = MemoryReserve{.bytes = 8 * kMiB}}))
                ->capacity(0),
            56 * kMiB);
}

TEST(UvaSpaceReserveTest, RejectsAReserveThatLeavesNothingAndBadChunks) {
  HostBackend backend(1, 64 * kMiB);
  auto all = UvaSpace::Create(&backend, {.reserve = MemoryReserve{.bytes = 63 * kMiB}});
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(all.status().message().find("device 0"), std::string::npos) << all.status();
  EXPECT_EQ(UvaSpace::Create(&backend, {.reserve = MemoryReserve{.fraction = 1.0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UvaSpace::Create(&backend, {.chunk = 3 * kMiB}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UvaSpace::Create(&backend, {.chunk = 1 * kMiB}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zero
