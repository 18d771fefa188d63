// The node range over forked processes: one address in every process, the
// owner's writes read in place by its peers, growth and trim seen, peers'
// views read-only, dead peers dropped, refusals named, nothing left behind.
#include "memory/node_range.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/node_backend.h"
#include "tests/memory/node_process.h"
#include "tests/memory/processes.h"

namespace zero {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;
using ::zero::testing::Processes;
using ::zero::testing::UniqueKey;
using ::zero::testing::JoinNode;
using ::zero::testing::kNodeCapacity;
using ::zero::testing::kNodeChunk;
using ::zero::testing::NodeOptions;

constexpr size_t kChunk = kNodeChunk;
constexpr int kFaulted = 42;  // a child's exit code: its write faulted

std::set<std::string> DevShm() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) names.insert(e->d_name);
    closedir(dir);
  }
  return names;
}

#define CHILD_OK(expr)                                                          \
  do {                                                                          \
    if (absl::Status s_ = (expr); !s_.ok()) return absl::StrCat(#expr, ": ", s_.ToString()); \
  } while (0)

class NodeRangeTest : public ::testing::TestWithParam<int> {};

TEST_P(NodeRangeTest, OwnersWritesReadTheSameInEveryPeer) {
  const int world = GetParam();
  const std::string key = UniqueKey("read");
  const std::set<std::string> shm_before = DevShm();
  Processes procs;
  auto results = procs.Run(world, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, world);
    if (!node.ok()) return node.status().ToString();
    auto* range = &node->range;
    auto* devices = &node->devices;
    const size_t n = size_t{3} << 20;  // two chunks: the view maps a run
    auto p = (*devices)->pool(0).Allocate(n);
    if (!p.ok()) return p.status().ToString();
    auto* bytes = static_cast<unsigned char*>(*p);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + rank);
    procs.board().words[rank][0] = (*range)->base();
    procs.board().words[rank][1] = reinterpret_cast<uintptr_t>(*p);
    procs.Barrier(0, world);
    for (int peer = 0; peer < world; ++peer) {
      if (procs.board().words[peer][0] != (*range)->base()) return "bases differ";
      const auto* theirs = reinterpret_cast<const unsigned char*>(procs.board().words[peer][1]);
      auto place = (*range)->Locate(theirs);
      if (!place || place->local_rank != peer) return absl::StrFormat("%p not located", theirs);
      CHILD_OK((*range)->SyncView(peer));
      for (size_t i = 0; i < n; i += 4093) {
        if (theirs[i] != static_cast<unsigned char>(i * 7 + peer)) {
          return absl::StrFormat("peer %d byte %d reads %d", peer, i, theirs[i]);
        }
      }
    }
    procs.Barrier(1, world);  // nobody unmaps while a peer reads
    CHILD_OK((*devices)->pool(0).Deallocate(*p, n));
    return "";
  });
  EXPECT_THAT(results, Each(""));
  EXPECT_EQ(DevShm(), shm_before) << "a run left something in /dev/shm";
}

TEST_P(NodeRangeTest, GrowthAndTrimAreSeenByEveryPeer) {
  const int world = GetParam();
  const std::string key = UniqueKey("grow");
  Processes procs;
  auto results = procs.Run(world, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, world);
    if (!node.ok()) return node.status().ToString();
    auto* range = &node->range;
    auto* devices = &node->devices;
    DevicePool& pool = (*devices)->pool(0);
    const size_t n = size_t{8} << 20;
    void* p = nullptr;
    if (rank == 0) {
      auto got = pool.Allocate(n);
      if (!got.ok()) return got.status().ToString();
      p = *got;
      std::memset(p, 1, n);
      procs.board().words[0][0] = reinterpret_cast<uintptr_t>(p);
      if ((*range)->resident_bytes(0) < n) return "written pages are not resident";
    }
    procs.Barrier(0, world);
    if (rank != 0) {
      if ((*range)->view_bytes(0) != 0) return "mapped before the sync";
      CHILD_OK((*range)->SyncView(0));
      if ((*range)->view_bytes(0) < n) return absl::StrFormat("view %d", (*range)->view_bytes(0));
      // Reading a peer's memory in place adds none.
      const size_t before = (*range)->resident_bytes(0);
      const auto* theirs = reinterpret_cast<const volatile char*>(procs.board().words[0][0]);
      for (size_t i = 0; i < n; i += 4096) {
        if (theirs[i] != 1) return "the peer's bytes differ";
      }
      if ((*range)->resident_bytes(0) != before) return "a peer's read added memory";
    }
    procs.Barrier(1, world);
    if (rank == 0) {
      CHILD_OK(pool.Deallocate(p, n));
      auto trimmed = pool.Trim();
      if (!trimmed.ok() || *trimmed < n) return "trim gave back too little";
      if ((*range)->announced_bytes(0) != 0) return "still announced after the trim";
      // Header and mailbox only: the trimmed pages went back.
      if ((*range)->resident_bytes(0) > (size_t{1} << 20)) return "the trim kept the pages";
    }
    procs.Barrier(2, world);
    if (rank != 0) {
      if ((*range)->announced_bytes(0) != 0) return "peer sees no trim";
      CHILD_OK((*range)->SyncView(0));
      if ((*range)->view_bytes(0) != 0) return "trimmed chunks still in the view";
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

INSTANTIATE_TEST_SUITE_P(Processes, NodeRangeTest, ::testing::Values(2, 4));

TEST(NodeRange, PeersViewIsReadOnly) {
  const std::string key = UniqueKey("readonly");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto node = JoinNode(key, rank, 2);
    if (!node.ok()) return node.status().ToString();
    auto* range = &node->range;
    auto* devices = &node->devices;
    auto p = (*devices)->pool(0).Allocate(4096);
    if (!p.ok()) return p.status().ToString();
    procs.board().words[rank][0] = reinterpret_cast<uintptr_t>(*p);
    procs.Barrier(0, 2);
    if (rank == 1) {
      CHILD_OK((*range)->SyncView(0));
      auto* theirs = reinterpret_cast<volatile char*>(procs.board().words[0][0]);
      (void)theirs[0];  // reading is fine
      const pid_t writer = fork();
      if (writer == 0) {
        // Our own handler, so the fault reads the same under sanitizers
        // (which would report it as a crash of their own).
        struct sigaction on_fault {};
        on_fault.sa_handler = [](int) { _exit(kFaulted); };
        sigaction(SIGSEGV, &on_fault, nullptr);
        theirs[0] = 1;  // must fault
        _exit(0);
      }
      int status = 0;
      waitpid(writer, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != kFaulted) {
        return "a write into the peer's slice did not fault";
      }
    }
    procs.Barrier(1, 2);
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

TEST(NodeRange, DeadPeerLeavesTheViewWithAnError) {
  const std::string key = UniqueKey("dead");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    auto range = NodeRange::Join(NodeOptions(key, rank, 2));
    if (!range.ok()) return range.status().ToString();
    if (rank == 1) _exit(0);  // gone without a word
    for (int i = 0; i < 2000; ++i) {
      absl::Status alive = (*range)->CheckAlive(1);
      if (!alive.ok()) {
        if (alive.code() != absl::StatusCode::kFailedPrecondition ||
            !absl::StrContains(alive.message(), "local rank 1") ||
            (*range)->view_bytes(1) != 0) {
          return alive.ToString();
        }
        return (*range)->SyncView(1).ok() ? "a dead peer's view synced" : "";
      }
      usleep(1000);
    }
    return "the dead peer was not noticed";
  });
  EXPECT_THAT(results, Each(""));
}

TEST(NodeRange, RangeThatCannotBeReservedIsRefusedByName) {
  // An address held free until each child joins (so nothing else of the
  // child's takes it), then taken in rank 1 only.
  const size_t total = 2 * NodeSliceBytes(kNodeCapacity, kChunk);
  void* probe = mmap(nullptr, total + kChunk, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const uintptr_t address = (reinterpret_cast<uintptr_t>(probe) + kChunk - 1) & ~(kChunk - 1);
  const std::string key = UniqueKey("refused");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    munmap(probe, total + kChunk);
    if (rank == 1) {
      void* squat = mmap(reinterpret_cast<void*>(address + total / 2), 4096, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (squat == MAP_FAILED) return "could not take the address";
    }
    NodeRangeOptions o = NodeOptions(key, rank, 2);
    o.address = address;
    auto range = NodeRange::Join(o);
    if (range.ok()) return "joined a range rank 1 could not reserve";
    const std::string text(range.status().message());
    if (range.status().code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(text, "local rank 1") || !absl::StrContains(text, "cannot reserve") ||
        !absl::StrContains(text, absl::StrFormat("%#x", address))) {
      return range.status().ToString();
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
  munmap(probe, total + kChunk);
}

TEST(NodeRange, MissingProcessIsNamedAtTheDeadline) {
  NodeRangeOptions o = NodeOptions(UniqueKey("missing"), 0, 3);
  o.timeout = absl::Milliseconds(200);
  auto range = NodeRange::Join(o);
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(range.status().message(), AllOf(HasSubstr("local ranks 1, 2"), HasSubstr("join")));
}

TEST(NodeRange, DifferentOptionsAreRefused) {
  const std::string key = UniqueKey("differ");
  Processes procs;
  auto results = procs.Run(2, [&](int rank) -> std::string {
    NodeRangeOptions o = NodeOptions(key, rank, 2);
    if (rank == 1) o.slice_bytes *= 2;
    o.timeout = absl::Seconds(2);
    auto range = NodeRange::Join(o);
    if (range.ok()) return "joined with different slices";
    if (rank == 0 && (range.status().code() != absl::StatusCode::kInvalidArgument ||
                      !absl::StrContains(range.status().message(), "local rank 1"))) {
      return range.status().ToString();
    }
    return "";
  });
  EXPECT_THAT(results, Each(""));
}

TEST(NodeRange, BadOptionsAndForeignAddressesAreRefused) {
  NodeRangeOptions o = NodeOptions("", 0, 1);
  EXPECT_EQ(NodeRange::Join(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = NodeOptions(UniqueKey("bad"), 0, 1);
  o.slice_bytes += 4096;
  EXPECT_EQ(NodeRange::Join(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = NodeOptions(UniqueKey("alone"), 0, 1);
  auto range = NodeRange::Join(o);
  ASSERT_TRUE(range.ok()) << range.status();
  const uintptr_t outside = (*range)->base() + (*range)->slice_bytes();
  EXPECT_EQ((*range)->MapOwn(outside, kChunk).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*range)->OpenOwn((*range)->base() + 1, kChunk).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*range)->Locate(reinterpret_cast<void*>(outside)).has_value());
}

}  // namespace
}  // namespace zero

namespace zero {
namespace {

TEST(NodeBackend, RefusesWhatItsSliceCannotHold) {
  auto range = NodeRange::Join(testing::NodeOptions(testing::UniqueKey("backend"), 0, 1));
  ASSERT_TRUE(range.ok()) << range.status();
  NodeBackend backend(*range, testing::kNodeCapacity);
  EXPECT_EQ(backend.Reserve((*range)->slice_bytes() + 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(backend.Reserve((*range)->slice_bytes()).ok());
  EXPECT_EQ(backend.Reserve(4096).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backend.CreatePhysical(1, (*range)->chunk()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.CreatePhysical(0, (*range)->chunk() + 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNodeDevices(nullptr, testing::kNodeCapacity).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NodeRange, AKeyTooLongForASocketNameIsRefused) {
  const std::string key(200, 'k');
  auto range = NodeRange::Join(testing::NodeOptions(key, 0, 2));
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument) << range.status();
}

}  // namespace
}  // namespace zero
