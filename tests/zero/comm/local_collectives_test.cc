// Every verb x dtype x {1,2,4,8} ranks on the local backend, against the
// rank-ordered fp32 reference, out of place and in place; synchronous (null
// stream) and stream-ordered (a host stream per rank, synchronized before
// the results are read).
#include <memory>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "memory/host_stream.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing {
namespace {

constexpr size_t kCounts[] = {0, 37, 3000};  // empty, uneven, several blocks
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

using Param = std::tuple<DType, int, bool>;

class LocalCollectivesTest : public ::testing::TestWithParam<Param> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  int world() const { return std::get<1>(GetParam()); }
  bool stream_ordered() const { return std::get<2>(GetParam()); }
  size_t elem() const { return SizeOf(dtype()); }

  Group MakeGroup() {
    // Delayed streams (memory/stream_delay.h): the ranks' workers reach
    // each collective in varying orders.
    const HostStreamOptions delayed{.delay_seed = 7, .max_delay = absl::Microseconds(50)};
    for (int r = 0; r < world() && stream_ordered(); ++r) {
      streams_.push_back(std::make_unique<HostStream>(r, delayed));
    }
    auto group = LocalGroup::Create(
        world(), {.timeout = absl::Seconds(60), .stream_ordered = stream_ordered()});
    EXPECT_TRUE(group.ok()) << group.status();
    return std::move(group).value();
  }

  Stream* stream(int rank) const { return stream_ordered() ? streams_[rank].get() : nullptr; }

  // fn(rank, comm) issues the call on stream(rank); then the rank waits for
  // its stream and reports the group's error, if any.
  std::vector<absl::Status> Run(Group& group,
                                const std::function<absl::Status(int, Communicator&)>& fn) {
    return RunRanks(group, [&](int r, Communicator& comm) {
      absl::Status status = fn(r, comm);
      if (status.ok() && stream(r) != nullptr) status = stream(r)->Synchronize();
      return status.ok() ? comm.AsyncError() : status;
    });
  }

  static void ExpectAllOk(const std::vector<absl::Status>& results) {
    for (size_t r = 0; r < results.size(); ++r)
      EXPECT_TRUE(results[r].ok()) << r << ": " << results[r];
  }

 private:
  std::vector<std::unique_ptr<HostStream>> streams_;  // one per rank when stream-ordered
};

TEST_P(LocalCollectivesTest, AllGather) {
  Group group = MakeGroup();
  for (bool in_place : {false, true}) {
    for (size_t count : kCounts) {
      SCOPED_TRACE(::testing::Message() << "count " << count << " in_place " << in_place);
      std::vector<Bytes> inputs, recv(world(), Bytes(world() * count * elem(), 0xAB));
      Bytes expected;
      for (int r = 0; r < world(); ++r) {
        inputs.push_back(Pattern(dtype(), r, count, 1));
        expected.insert(expected.end(), inputs[r].begin(), inputs[r].end());
        if (in_place) {
          std::copy(inputs[r].begin(), inputs[r].end(), recv[r].begin() + r * count * elem());
        }
      }
      ExpectAllOk(Run(group, [&](int r, Communicator& comm) {
        const void* send = in_place ? recv[r].data() + r * count * elem() : inputs[r].data();
        return comm.AllGather(send, recv[r].data(), count, dtype(), stream(r));
      }));
      for (int r = 0; r < world(); ++r) EXPECT_EQ(recv[r], expected) << "rank " << r;
    }
  }
}

TEST_P(LocalCollectivesTest, ReduceScatter) {
  Group group = MakeGroup();
  for (ReduceOp op : kOps) {
    for (bool in_place : {false, true}) {
      for (size_t count : kCounts) {
        SCOPED_TRACE(::testing::Message()
                     << Name(op) << " count " << count << " in_place " << in_place);
        std::vector<Bytes> inputs, send, recv(world(), Bytes(count * elem(), 0xAB));
        for (int r = 0; r < world(); ++r) inputs.push_back(Pattern(dtype(), r, world() * count, 2));
        send = inputs;  // in place overwrites the send buffers
        ExpectAllOk(Run(group, [&](int r, Communicator& comm) {
          void* out = in_place ? send[r].data() + r * count * elem() : recv[r].data();
          return comm.ReduceScatter(send[r].data(), out, count, dtype(), op, stream(r));
        }));
        for (int r = 0; r < world(); ++r) {
          const Bytes got = in_place ? Slice(send[r], dtype(), r * count, count) : recv[r];
          EXPECT_EQ(got, Reference(dtype(), op, inputs, r * count, count)) << "rank " << r;
        }
      }
    }
  }
}

TEST_P(LocalCollectivesTest, AllReduce) {
  Group group = MakeGroup();
  for (ReduceOp op : kOps) {
    for (bool in_place : {false, true}) {
      for (size_t count : kCounts) {
        SCOPED_TRACE(::testing::Message()
                     << Name(op) << " count " << count << " in_place " << in_place);
        std::vector<Bytes> inputs, send, recv(world(), Bytes(count * elem(), 0xAB));
        for (int r = 0; r < world(); ++r) inputs.push_back(Pattern(dtype(), r, count, 3));
        send = inputs;
        ExpectAllOk(Run(group, [&](int r, Communicator& comm) {
          void* out = in_place ? send[r].data() : recv[r].data();
          return comm.AllReduce(send[r].data(), out, count, dtype(), op, stream(r));
        }));
        const Bytes expected = Reference(dtype(), op, inputs, 0, count);
        for (int r = 0; r < world(); ++r)
          EXPECT_EQ(in_place ? send[r] : recv[r], expected) << "rank " << r;
      }
    }
  }
}

TEST_P(LocalCollectivesTest, Broadcast) {
  Group group = MakeGroup();
  for (int root : {0, world() - 1}) {
    for (bool in_place : {false, true}) {
      for (size_t count : kCounts) {
        SCOPED_TRACE(::testing::Message()
                     << "root " << root << " count " << count << " in_place " << in_place);
        std::vector<Bytes> inputs, recv(world(), Bytes(count * elem(), 0xAB));
        for (int r = 0; r < world(); ++r) inputs.push_back(Pattern(dtype(), r, count, 4));
        recv[root] = in_place ? inputs[root] : recv[root];
        ExpectAllOk(Run(group, [&](int r, Communicator& comm) {
          // A non-root's send is never read; in place it is null, as NCCL allows.
          const void* send = in_place ? (r == root ? recv[r].data() : nullptr) : inputs[r].data();
          return comm.Broadcast(send, recv[r].data(), count, dtype(), root, stream(r));
        }));
        for (int r = 0; r < world(); ++r) EXPECT_EQ(recv[r], inputs[root]) << "rank " << r;
      }
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(Name(std::get<0>(info.param))) + "_x" +
         std::to_string(std::get<1>(info.param)) +
         (std::get<2>(info.param) ? "_stream_ordered" : "_sync");
}

INSTANTIATE_TEST_SUITE_P(DTypesWorldsAndModes, LocalCollectivesTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16,
                                                              DType::kF16),
                                            ::testing::Values(1, 2, 4, 8), ::testing::Bool()),
                         ParamName);

}  // namespace
}  // namespace zero::testing
