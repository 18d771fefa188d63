// The node communicator over forked processes sharing a node range: every
// collective equals the rank-order fp32 result bit for bit (the local
// backend's and the ordered process-group path's bits), on a host stream
// and on the calling thread, from the pool or from outside the range; and
// a dead, stalled, mismatched or misbehaving peer is an error, never a hang.
#include "zero/comm/node_communicator.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/status_macros.h"
#include "memory/node_backend.h"
#include "tests/memory/node_process.h"
#include "tests/memory/processes.h"

namespace zero {
namespace {

using ::testing::Each;
using ::zero::testing::Processes;
using ::zero::testing::UniqueKey;

// A value no two (rank, index) pairs share, with fractions that make fp32
// sums depend on their order.
float Input(int rank, size_t i) {
  return std::ldexp(static_cast<float>((i * 2654435761u + rank * 40503u) % 100003), -7) *
         (rank % 2 ? -1.0f : 1.0f) + 0.1f * static_cast<float>(rank);
}

// The sum in rank order, in fp32: what every backend here must give.
float RankOrderSum(int world, size_t i) {
  float sum = Input(0, i);
  for (int r = 1; r < world; ++r) sum += Input(r, i);
  return sum;
}

struct Node {
  std::shared_ptr<NodeRange> range;
  std::unique_ptr<DeviceSystem> devices;
  std::unique_ptr<Communicator> comm;
};

absl::StatusOr<Node> JoinNode(const std::string& key, int rank, int world,
                              absl::Duration timeout = absl::Seconds(30)) {
  ASSIGN_OR_RETURN(testing::NodeProcess process, testing::JoinNode(key, rank, world));
  Node node{std::move(process.range), std::move(process.devices), nullptr};
  ASSIGN_OR_RETURN(node.comm,
                   MakeNodeCommunicator(node.range, &node.devices->pool(0), {timeout}));
  return node;
}

float* Floats(Node& node, size_t n) {
  return static_cast<float*>(*node.devices->pool(0).Allocate(n * sizeof(float)));
}

std::string Mismatch(const char* what, size_t i, float got, float want) {
  return absl::StrFormat("%s[%d] = %.9g, want %.9g", what, i, got, want);
}

// Every collective once, checked against the rank-order arithmetic.
std::string RunAll(Node& node, Stream* stream, bool send_outside) {
  Communicator& comm = *node.comm;
  const int rank = comm.rank(), world = comm.world_size();
  const size_t count = 50021;  // not a multiple of the world: uneven all-reduce chunks
  std::vector<float> heap(count * world);
  float* send = send_outside ? heap.data() : Floats(node, count * world);
  float* recv = Floats(node, count * world);
  auto sync = [&]() -> absl::Status {
    if (stream != nullptr) RETURN_IF_ERROR(stream->Synchronize());
    return comm.AsyncError();
  };
  auto fill = [&] { for (size_t i = 0; i < count * world; ++i) send[i] = Input(rank, i); };
  fill();
  if (absl::Status s = comm.AllGather(send + rank * count, recv, count, DType::kF32, stream);
      !s.ok() || !(s = sync()).ok()) {
    return s.ToString();
  }
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < count; i += 97) {
      if (recv[r * count + i] != Input(r, r * count + i)) {
        return Mismatch("all-gather", r * count + i, recv[r * count + i], Input(r, r * count + i));
      }
    }
  }
  if (absl::Status s = comm.ReduceScatter(send, recv, count, DType::kF32, ReduceOp::kSum, stream);
      !s.ok() || !(s = sync()).ok()) {
    return s.ToString();
  }
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != RankOrderSum(world, rank * count + i)) {
      return Mismatch("reduce-scatter", i, recv[i], RankOrderSum(world, rank * count + i));
    }
  }
  if (absl::Status s = comm.AllReduce(send, recv, count * world, DType::kF32, ReduceOp::kSum, stream);
      !s.ok() || !(s = sync()).ok()) {
    return s.ToString();
  }
  for (size_t i = 0; i < count * world; ++i) {
    if (recv[i] != RankOrderSum(world, i)) return Mismatch("all-reduce", i, recv[i], RankOrderSum(world, i));
  }
  for (size_t i = 0; i < count * world; ++i) recv[i] = Input(rank, i);  // in place
  if (absl::Status s = comm.AllReduce(recv, recv, count * world, DType::kF32, ReduceOp::kSum, stream);
      !s.ok() || !(s = sync()).ok()) {
    return s.ToString();
  }
  for (size_t i = 0; i < count * world; ++i) {
    if (recv[i] != RankOrderSum(world, i)) return Mismatch("in-place all-reduce", i, recv[i], RankOrderSum(world, i));
  }
  const int root = world - 1;
  if (absl::Status s = comm.Broadcast(send, recv, count, DType::kF32, root, stream);
      !s.ok() || !(s = sync()).ok()) {
    return s.ToString();
  }
  for (size_t i = 0; i < count; i += 13) {
    if (recv[i] != Input(root, i)) return Mismatch("broadcast", i, recv[i], Input(root, i));
  }
  if (absl::Status s = comm.AllToAll(send, recv, count, DType::kF32, stream);
      !s.ok() || !(s = sync()).ok()) {
    return s.ToString();
  }
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < count; i += 31) {
      const float want = Input(r, rank * count + i);
      if (recv[r * count + i] != want) return Mismatch("all-to-all", r * count + i, recv[r * count + i], want);
    }
  }
  if (absl::Status s = comm.Barrier(stream); !s.ok() || !(s = sync()).ok()) return s.ToString();
  return comm.stats().copied_bytes > 0 && comm.stats().reduced_bytes > 0 ? "" : "no bytes counted";
}

class NodeCommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(NodeCommunicatorTest, CollectivesEqualRankOrderArithmetic) {
  const int world = GetParam();
  const std::string key = UniqueKey("comm");
  Processes procs;
  auto results = procs.Run(world, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, world);
    if (!node.ok()) return node.status().ToString();
    auto stream = node->devices->CreateStream(0);
    if (!stream.ok()) return stream.status().ToString();
    for (Stream* s : {static_cast<Stream*>(nullptr), *stream}) {
      for (bool outside : {false, true}) {
        if (std::string e = RunAll(*node, s, outside); !e.empty()) {
          return absl::StrCat(s ? "stream" : "thread", outside ? ", outside: " : ": ", e);
        }
      }
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

INSTANTIATE_TEST_SUITE_P(Processes, NodeCommunicatorTest, ::testing::Values(2, 4));

TEST(NodeCommunicator, CallsOnAStreamAndTheThreadRunInTheirOrder) {
  const std::string key = UniqueKey("order");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 2);
    if (!node.ok()) return node.status().ToString();
    auto stream = node->devices->CreateStream(0);
    if (!stream.ok()) return stream.status().ToString();
    const size_t n = 4096;
    float* gathered = Floats(*node, 2 * n);
    float* summed = Floats(*node, n);
    for (size_t i = 0; i < n; ++i) gathered[rank * n + i] = summed[i] = Input(rank, i);
    // Call #1 waits behind slow work on the stream; call #2, on this
    // thread, must not take the process's slot before it.
    (void)(*stream)->Enqueue([] { absl::SleepFor(absl::Milliseconds(50)); });
    absl::Status s = node->comm->AllGather(gathered + rank * n, gathered, n, DType::kF32, *stream);
    if (s.ok()) s = node->comm->AllReduce(summed, summed, n, DType::kF32, ReduceOp::kSum, nullptr);
    if (s.ok()) s = (*stream)->Synchronize();
    if (s.ok()) s = node->comm->AsyncError();
    if (!s.ok()) return s.ToString();
    for (size_t i = 0; i < n; ++i) {
      if (summed[i] != RankOrderSum(2, i)) return Mismatch("all-reduce", i, summed[i], RankOrderSum(2, i));
      if (gathered[n + i] != Input(1, i)) return Mismatch("all-gather", n + i, gathered[n + i], Input(1, i));
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

TEST(NodeCommunicator, KilledPeerIsAnErrorOnTheOthers) {
  const std::string key = UniqueKey("killed");
  Processes procs;
  auto results = procs.Run(3, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 3);
    if (!node.ok()) return node.status().ToString();
    float* buffer = Floats(*node, 3 * 1024);
    if (absl::Status s = node->comm->AllGather(buffer + rank * 1024, buffer, 1024, DType::kF32, nullptr);
        !s.ok()) {
      return s.ToString();
    }
    if (rank == 2) raise(SIGKILL);  // mid-training: its peers are already in the next call
    const absl::Time start = absl::Now();
    absl::Status s = node->comm->AllGather(buffer + rank * 1024, buffer, 1024, DType::kF32, nullptr);
    if (s.ok()) return "a collective with a dead peer succeeded";
    if (absl::Now() - start > absl::Seconds(10)) return "took longer than the liveness check";
    // Either it saw the death itself or its peer's failure, which names it.
    if (!absl::StrContains(s.message(), "local rank 2")) return s.ToString();
    return node->comm->AsyncError().ok() ? "the group is not failed" : "";
  });
  EXPECT_EQ(results[0], "");
  EXPECT_EQ(results[1], "");
  EXPECT_THAT(results[2], ::testing::HasSubstr("signal 9"));
}

TEST(NodeCommunicator, StalledPeerIsADeadlineNamingIt) {
  const std::string key = UniqueKey("stalled");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 2, absl::Milliseconds(300));
    if (!node.ok()) return node.status().ToString();
    if (rank == 1) {
      procs.Barrier(0, 2);
      return "";
    }
    absl::Status s = node->comm->Barrier(nullptr);
    procs.Barrier(0, 2);
    if (s.code() != absl::StatusCode::kDeadlineExceeded ||
        !absl::StrContains(s.message(), "local rank 1 did not arrive")) {
      return s.ToString();
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

// A rank that waits long for a peer sleeps on the peer's flag rather than
// spinning or yielding, so a node with more processes than cores keeps its
// cores for the work: half a second's wait costs well under 3% of a core
// (the yield-then-50-us-sleep loop it replaced took 15%: 78 ms in 500).
TEST(NodeCommunicator, AWaitForALatePeerSleeps) {
  const std::string key = UniqueKey("sleeps");
  constexpr absl::Duration kLate = absl::Milliseconds(500);
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 2);
    if (!node.ok()) return node.status().ToString();
    if (rank == 1) absl::SleepFor(kLate);
    timespec cpu_start, cpu_end;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
    const absl::Time start = absl::Now();
    if (absl::Status s = node->comm->Barrier(nullptr); !s.ok()) return s.ToString();
    const absl::Duration waited = absl::Now() - start;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
    if (rank == 1) return "";
    const absl::Duration cpu = absl::DurationFromTimespec(cpu_end) -
                               absl::DurationFromTimespec(cpu_start);
    if (waited < kLate / 2) return absl::StrCat("waited only ", absl::FormatDuration(waited));
    if (cpu > waited * 0.03) {
      return absl::StrCat("waiting ", absl::FormatDuration(waited), " took ",
                          absl::FormatDuration(cpu), " of CPU");
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

TEST(NodeCommunicator, MismatchedCallsFailEveryRank) {
  const std::string key = UniqueKey("mismatch");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 2);
    if (!node.ok()) return node.status().ToString();
    float* buffer = Floats(*node, 64);
    absl::Status s = node->comm->AllGather(buffer + rank * (8 + 8 * rank), buffer, 8 + 8 * rank,
                                           DType::kF32, nullptr);
    if (s.code() != absl::StatusCode::kFailedPrecondition) return s.ToString();
    return absl::StrContains(s.message(), "differs") || absl::StrContains(s.message(), "failed")
               ? ""
               : s.ToString();
  });
  EXPECT_THAT(results, Each(""));
}

TEST(NodeCommunicator, WritingIntoAPeersSliceIsRefused) {
  const std::string key = UniqueKey("peerwrite");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 2);
    if (!node.ok()) return node.status().ToString();
    float* buffer = Floats(*node, 64);
    procs.board().words[rank][0] = reinterpret_cast<uintptr_t>(buffer);
    procs.Barrier(0, 2);
    float* target = rank == 0 ? reinterpret_cast<float*>(procs.board().words[1][0]) : buffer;
    absl::Status s = node->comm->AllReduce(buffer, target, 16, DType::kF32, ReduceOp::kSum, nullptr);
    if (rank == 0) {
      return s.code() == absl::StatusCode::kInvalidArgument &&
                     absl::StrContains(s.message(), "local rank 1's slice")
                 ? ""
                 : s.ToString();
    }
    return s.code() == absl::StatusCode::kFailedPrecondition ? "" : s.ToString();
  });
  EXPECT_THAT(results, Each(""));
}

}  // namespace
}  // namespace zero

namespace zero {
namespace {

TEST(NodeCommunicator, BadPartsAndAForeignPoolAreRefused) {
  auto node = JoinNode(UniqueKey("foreign"), 0, 1);
  ASSERT_TRUE(node.ok()) << node.status();
  MemoryResource* pool = &node->devices->pool(0);
  EXPECT_EQ(MakeNodeCommunicator(nullptr, pool).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeNodeCommunicator(node->range, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeNodeCommunicator(node->range, pool, {absl::ZeroDuration()}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Staging must come from this process's slice: a pool elsewhere is refused.
  auto elsewhere = DeviceSystem::Create(*ParseDeviceSpec("host:1x64MiB"));
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  auto comm = MakeNodeCommunicator(node->range, &(*elsewhere)->pool(0));
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> heap(8, 1.0f);  // outside the range: staged
  float* recv = Floats(*node, 8);
  absl::Status s = (*comm)->AllGather(heap.data(), recv, 8, DType::kF32, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("not this process's pool"), std::string::npos) << s;
  EXPECT_FALSE((*comm)->AsyncError().ok());
}

}  // namespace
}  // namespace zero
