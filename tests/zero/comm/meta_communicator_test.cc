// The meta backend: one rank alone, same validation and same ring-model
// counts as the local backend, no bytes moved, no waiting.
#include <chrono>
#include <thread>
#include <cstdint>
#include <vector>

#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zero/comm/local_communicator.h"
#include "zero/comm/meta_communicator.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

// Addresses that are never dereferenced, like a meta device's.
void* Fake(uintptr_t address) { return reinterpret_cast<void*>(address); }
constexpr uintptr_t kA = uintptr_t{1} << 56, kB = kA + (uintptr_t{1} << 40);

absl::Status OneOfEach(Communicator& comm, size_t count) {
  const int n = comm.world_size();
  RETURN_IF_ERROR(comm.AllGather(Fake(kA), Fake(kB), count, DType::kBF16, nullptr));
  RETURN_IF_ERROR(comm.ReduceScatter(Fake(kB), Fake(kA), count, DType::kBF16, ReduceOp::kSum,
                                     nullptr));
  RETURN_IF_ERROR(
      comm.AllReduce(Fake(kB), Fake(kB), count * n, DType::kBF16, ReduceOp::kAvg, nullptr));
  RETURN_IF_ERROR(comm.Broadcast(Fake(kA), Fake(kA), count, DType::kBF16, 1, nullptr));
  return comm.Barrier(nullptr);
}

TEST(MetaCommunicatorTest, RejectsBadGroups) {
  EXPECT_TRUE(absl::IsInvalidArgument(MetaCommunicator::Create(0, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MetaCommunicator::Create(4, 4).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MetaCommunicator::Create(-1, 4).status()));
  auto comm = MetaCommunicator::Create(1023, 1024);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->rank(), 1023);
  EXPECT_EQ((*comm)->world_size(), 1024);
}

// Every rank of a local meta group counts exactly what a lone meta rank does.
TEST(MetaCommunicatorTest, CountsWhatTheLocalBackendCountsForEveryRank) {
  constexpr int kWorld = 4;
  constexpr size_t kCount = 1000;
  auto group = LocalGroup::Create(kWorld, {.timeout = absl::Seconds(60), .has_bytes = false});
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] { status[r] = OneOfEach(*(*group)[r], kCount); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    auto meta = MetaCommunicator::Create(r, kWorld);
    ASSERT_TRUE(meta.ok());
    ASSERT_TRUE(OneOfEach(**meta, kCount).ok());
    const CommStats local = (*group)[r]->stats(), alone = (*meta)->stats();
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      EXPECT_EQ(alone.by_kind[k], local.by_kind[k]) << "rank " << r << " kind " << k;
    }
  }
}

TEST(MetaCommunicatorTest, RingTrafficAtScale) {
  auto comm = MetaCommunicator::Create(0, 1024);
  ASSERT_TRUE(comm.ok());
  ASSERT_TRUE((*comm)->AllGather(Fake(kA), Fake(kB), 16, DType::kF32, nullptr).ok());
  const OpStats ag = (*comm)->stats()[CollectiveKind::kAllGather];
  EXPECT_EQ(ag.calls, 1u);
  EXPECT_EQ(ag.elements_sent, 1023u * 16);
  EXPECT_EQ(ag.bytes_received, 1023u * 16 * 4);
}

TEST(MetaCommunicatorTest, ReturnsAtOnce) {
  auto comm = MetaCommunicator::Create(0, 1024);
  ASSERT_TRUE(comm.ok());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000; ++i) {
    ASSERT_TRUE((*comm)->AllGather(Fake(kA), Fake(kB), size_t{1} << 30, DType::kBF16, nullptr)
                    .ok());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);
  EXPECT_EQ((*comm)->stats().Total().calls, 100000u);
}

TEST(MetaCommunicatorTest, ValidatesLikeEveryBackendAndThenStaysFailed) {
  auto comm = MetaCommunicator::Create(2, 4);
  ASSERT_TRUE(comm.ok());
  EXPECT_TRUE((*comm)->AsyncError().ok());
  absl::Status null_recv = (*comm)->AllGather(Fake(kA), nullptr, 8, DType::kF32, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(null_recv)) << null_recv;
  EXPECT_THAT(null_recv.message(), HasSubstr("AllGather(f32 x 8) on rank 2"));
  EXPECT_THAT(null_recv.message(), HasSubstr("recv buffer is null"));
  // Nothing counted, and the group is failed for later calls.
  EXPECT_EQ((*comm)->stats().Total().calls, 0u);
  EXPECT_EQ((*comm)->Barrier(nullptr), null_recv);
  EXPECT_EQ((*comm)->AsyncError(), null_recv);
}

TEST(MetaCommunicatorTest, RejectsOverlapAndBadRoot) {
  auto comm = MetaCommunicator::Create(1, 4);
  ASSERT_TRUE(comm.ok());
  // Overlapping but not in place: send one element after recv.
  EXPECT_THAT((*comm)->AllReduce(Fake(kA + 4), Fake(kA), 16, DType::kF32, ReduceOp::kSum,
                                 nullptr)
                  .message(),
              HasSubstr("not in place"));
  auto other = MetaCommunicator::Create(1, 4);
  ASSERT_TRUE(other.ok());
  EXPECT_THAT((*other)->Broadcast(Fake(kA), Fake(kB), 16, DType::kF32, 4, nullptr).message(),
              HasSubstr("root 4 is outside [0, 4)"));
  // In place is fine, and count 0 is a valid call with null buffers.
  auto third = MetaCommunicator::Create(1, 4);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE((*third)->AllGather(Fake(kA + 64), Fake(kA), 16, DType::kF32, nullptr).ok());
  EXPECT_TRUE((*third)->AllReduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, nullptr).ok());
  EXPECT_EQ((*third)->stats().Total().calls, 2u);
}

TEST(MetaCommunicatorTest, AbortFailsLaterCalls) {
  auto comm = MetaCommunicator::Create(0, 8);
  ASSERT_TRUE(comm.ok());
  (*comm)->Abort(absl::InternalError("rank 0 gave up"));
  (*comm)->Abort(absl::OkStatus());  // the first reason stays
  EXPECT_EQ((*comm)->Barrier(nullptr), absl::InternalError("rank 0 gave up"));
  EXPECT_EQ((*comm)->AsyncError(), absl::InternalError("rank 0 gave up"));
  auto other = MetaCommunicator::Create(0, 8);
  ASSERT_TRUE(other.ok());
  (*other)->Abort(absl::OkStatus());
  EXPECT_TRUE(absl::IsCancelled((*other)->Barrier(nullptr)));
}

}  // namespace
}  // namespace zero
