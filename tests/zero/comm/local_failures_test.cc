// The local backend never hangs: mismatched calls, a missing rank, invalid
// arguments and Abort fail every rank, and the group stays failed.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing {
namespace {

using ::testing::HasSubstr;

Group MakeGroup(int world, absl::Duration timeout) {
  auto group = LocalGroup::Create(world, {.timeout = timeout});
  EXPECT_TRUE(group.ok()) << group.status();
  return std::move(group).value();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(LocalFailuresTest, MismatchFailsEveryRankNamingTheCall) {
  // A long timeout: the mismatch must be reported without waiting for it.
  Group group = MakeGroup(4, absl::Seconds(60));
  std::vector<float> send(1024 * 4), recv(1024 * 4);
  const auto start = std::chrono::steady_clock::now();
  auto results = RunRanks(group, [&](int r, Communicator& comm) -> absl::Status {
    std::vector<float> mine(send), out(recv);
    RETURN_IF_ERROR(comm.Barrier(nullptr));  // #1 agrees
    return r == 3 ? comm.ReduceScatter(mine.data(), out.data(), 256, DType::kF32,
                                       ReduceOp::kSum, nullptr)
                  : comm.AllGather(mine.data(), out.data(), 1024, DType::kF32, nullptr);
  });
  EXPECT_LT(SecondsSince(start), 10.0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(absl::IsFailedPrecondition(results[r])) << results[r];
    EXPECT_EQ(results[r].message(),
              "collective #2 differs: ranks 0-2 AllGather(f32 x 1024); "
              "rank 3 ReduceScatter(f32 x 256, sum)");
  }
}

TEST(LocalFailuresTest, DifferentCountOrRootIsAMismatchToo) {
  Group group = MakeGroup(2, absl::Seconds(60));
  std::vector<float> buf(8);
  auto results = RunRanks(group, [&](int r, Communicator& comm) {
    std::vector<float> mine(buf);
    return comm.Broadcast(mine.data(), mine.data(), 8, DType::kF32, /*root=*/r, nullptr);
  });
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.message(),
              "collective #1 differs: rank 0 Broadcast(f32 x 8, root 0); "
              "rank 1 Broadcast(f32 x 8, root 1)");
  }
}

TEST(LocalFailuresTest, MissingRankTimesOutEverywhereAndPoisons) {
  Group group = MakeGroup(4, absl::Milliseconds(200));
  std::vector<float> data(4 * 16);
  const auto start = std::chrono::steady_clock::now();
  auto results = RunRanks(group, [&](int r, Communicator& comm) -> absl::Status {
    std::vector<float> mine(16, 1.0f);
    RETURN_IF_ERROR(comm.Barrier(nullptr));
    if (r == 3) return absl::OkStatus();  // skips collective #2
    return comm.AllReduce(mine.data(), mine.data(), 16, DType::kF32, ReduceOp::kSum, nullptr);
  });
  const double waited = SecondsSince(start);
  EXPECT_GE(waited, 0.19);
  EXPECT_LT(waited, 5.0);
  EXPECT_TRUE(results[3].ok());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(results[r])) << results[r];
    EXPECT_EQ(results[r].message(),
              "collective #2 timed out after 200ms waiting for rank 3: ranks 0-2 waiting in #2 "
              "AllReduce(f32 x 16, sum); rank 3 last called #1 Barrier() (returned)");
  }
  // Poisoned: the late rank, and everyone after, fail fast with the cause.
  const auto late = std::chrono::steady_clock::now();
  auto again = RunRanks(group, [&](int, Communicator& comm) { return comm.Barrier(nullptr); });
  EXPECT_LT(SecondsSince(late), 1.0);
  for (const absl::Status& s : again) EXPECT_EQ(s, results[0]);
  for (const auto& comm : group) EXPECT_EQ(comm->AsyncError(), results[0]);
}

TEST(LocalFailuresTest, ErrorsPoisonTheGroup) {
  Group group = MakeGroup(3, absl::Seconds(60));
  for (const auto& comm : group) EXPECT_TRUE(comm->AsyncError().ok());
  auto first = RunRanks(group, [&](int r, Communicator& comm) {
    return r == 0 ? comm.Barrier(nullptr)
                  : comm.AllReduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, nullptr);
  });
  for (const absl::Status& s : first) EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  for (int round = 0; round < 3; ++round) {
    auto later = RunRanks(group, [&](int, Communicator& comm) { return comm.Barrier(nullptr); });
    for (const absl::Status& s : later) EXPECT_EQ(s, first[0]);
  }
}

TEST(LocalFailuresTest, InvalidArgumentsFailTheRankAndReleaseThePeers) {
  Group group = MakeGroup(4, absl::Seconds(60));  // must not take the timeout
  const auto start = std::chrono::steady_clock::now();
  auto results = RunRanks(group, [&](int r, Communicator& comm) {
    std::vector<float> send(8), recv(32);
    return comm.AllGather(r == 2 ? nullptr : send.data(), recv.data(), 8, DType::kF32, nullptr);
  });
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_TRUE(absl::IsInvalidArgument(results[2])) << results[2];
  EXPECT_EQ(results[2].message(), "AllGather(f32 x 8) on rank 2: send buffer is null");
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(absl::IsFailedPrecondition(results[r])) << results[r];
    EXPECT_EQ(results[r].message(),
              "collective #1 failed on rank 2: AllGather(f32 x 8) on rank 2: send buffer is null");
  }
}

TEST(LocalFailuresTest, EveryRankWithBadArgumentsGetsItsOwnError) {
  Group group = MakeGroup(4, absl::Seconds(60));
  auto results = RunRanks(group, [&](int, Communicator& comm) {
    std::vector<float> buf(8);
    return comm.Broadcast(buf.data(), buf.data(), 8, DType::kF32, /*root=*/7, nullptr);
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(absl::IsInvalidArgument(results[r])) << results[r];
    EXPECT_THAT(std::string(results[r].message()), HasSubstr("root 7 is outside [0, 4)"));
  }
}

TEST(LocalFailuresTest, UnknownDTypeAndOpAreInvalid) {
  Group group = MakeGroup(1, absl::Seconds(60));
  std::vector<float> buf(8);
  EXPECT_TRUE(absl::IsInvalidArgument(group[0]->AllReduce(
      buf.data(), buf.data(), 8, static_cast<DType>(9), ReduceOp::kSum, nullptr)));
  group = MakeGroup(1, absl::Seconds(60));
  EXPECT_TRUE(absl::IsInvalidArgument(group[0]->AllReduce(buf.data(), buf.data(), 8, DType::kF32,
                                                          static_cast<ReduceOp>(5), nullptr)));
}

TEST(LocalFailuresTest, PartialOverlapIsInvalid) {
  Group group = MakeGroup(1, absl::Seconds(60));
  std::vector<float> buf(16);
  absl::Status s =
      group[0]->AllReduce(buf.data() + 1, buf.data(), 8, DType::kF32, ReduceOp::kSum, nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("overlap"));
}

TEST(LocalFailuresTest, AbortReleasesWaitingRanks) {
  Group group = MakeGroup(4, absl::Seconds(60));
  auto results = RunRanks(group, [&](int r, Communicator& comm) -> absl::Status {
    if (r == 0) {
      comm.Abort(absl::ResourceExhaustedError("rank 0 ran out of memory"));
      return absl::OkStatus();
    }
    return comm.Barrier(nullptr);
  });
  for (int r = 1; r < 4; ++r) {
    EXPECT_TRUE(absl::IsResourceExhausted(results[r])) << results[r];
    EXPECT_EQ(results[r].message(), "rank 0 ran out of memory");
  }
}

TEST(LocalFailuresTest, DestroyedRankReleasesPeers) {
  Group group = MakeGroup(3, absl::Seconds(60));
  group[2].reset();
  auto results = RunRanks(group, [&](int, Communicator& comm) { return comm.Barrier(nullptr); });
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].message(),
              "collective #1: rank 2 left the group (its communicator was destroyed) before any "
              "collective");
  }
}

// A rank whose communicator goes after the last collective every rank made
// does not fail a slower peer still finishing it (Engine::Step ends with
// AsyncError); only a call beyond it fails, at once.
TEST(LocalFailuresTest, ARankThatLeavesAfterTheLastCollectiveFailsOnlyLaterCalls) {
  Group group = MakeGroup(2, absl::Seconds(60));
  std::vector<float> send(4, 1.0f), recv0(4), recv1(4);
  std::thread first([&] {
    EXPECT_TRUE(group[0]->AllReduce(send.data(), recv0.data(), 4, DType::kF32, ReduceOp::kSum,
                                    nullptr).ok());
    group[0].reset();
  });
  ASSERT_TRUE(group[1]->AllReduce(send.data(), recv1.data(), 4, DType::kF32, ReduceOp::kSum,
                                  nullptr).ok());
  first.join();
  EXPECT_TRUE(group[1]->AsyncError().ok()) << group[1]->AsyncError();
  EXPECT_EQ(recv1, std::vector<float>(4, 2.0f));
  const absl::Status later = group[1]->Barrier(nullptr);
  EXPECT_EQ(later.message(),
            "collective #2: rank 0 left the group (its communicator was destroyed) after "
            "collective #1");
}

TEST(LocalFailuresTest, CreateRejectsBadOptions) {
  EXPECT_TRUE(absl::IsInvalidArgument(LocalGroup::Create(0).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(LocalGroup::Create(2, {.timeout = absl::ZeroDuration()}).status()));
}

}  // namespace
}  // namespace zero::testing
