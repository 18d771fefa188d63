// The callback communicator's C++ table (zero/comm/callback_communicator.h):
// what reaches each function, and how a function's error becomes the
// communicator's. The order of the calls against streams is
// tests/zero/capi/callback_order_test.cc's (through the C ABI's adapter).
#include "zero/comm/callback_communicator.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

// Every collective succeeds and logs what it was given.
CallbackCollectives Logging(std::vector<std::string>* log) {
  CallbackCollectives fns;
  fns.all_gather = [log](const void*, void*, size_t n, DType dtype, void* stream) {
    log->push_back(absl::StrFormat("all_gather %d %s %p", n, Name(dtype), stream));
    return absl::OkStatus();
  };
  fns.reduce_scatter = [log](const void*, void*, size_t n, DType dtype, ReduceOp op, void*) {
    log->push_back(absl::StrFormat("reduce_scatter %d %s %s", n, Name(dtype), Name(op)));
    return absl::OkStatus();
  };
  fns.all_reduce = [log](const void*, void*, size_t n, DType dtype, ReduceOp op, void*) {
    log->push_back(absl::StrFormat("all_reduce %d %s %s", n, Name(dtype), Name(op)));
    return absl::OkStatus();
  };
  fns.broadcast = [log](const void*, void*, size_t n, DType dtype, int root, void*) {
    log->push_back(absl::StrFormat("broadcast %d %s root %d", n, Name(dtype), root));
    return absl::OkStatus();
  };
  fns.barrier = [log](void*) {
    log->push_back("barrier");
    return absl::OkStatus();
  };
  return fns;
}

// all_to_all is optional: without it the call is Unimplemented (and the
// group fails: the peers would wait for it), with it the call reaches it.
TEST(CallbackCommunicator, AllToAllIsOptional) {
  std::vector<std::string> log;
  std::vector<float> send(8), recv(8);
  auto without = *CallbackCommunicator::Create(0, 2, Logging(&log));
  const absl::Status missing = without->AllToAll(send.data(), recv.data(), 4, DType::kF32, nullptr);
  EXPECT_TRUE(absl::IsUnimplemented(missing)) << missing;
  EXPECT_NE(missing.message().find("all_to_all"), std::string::npos) << missing;
  CallbackCollectives fns = Logging(&log);
  fns.all_to_all = [&log](const void*, void*, size_t n, DType dtype, void*) {
    log.push_back(absl::StrFormat("all_to_all %d %s", n, Name(dtype)));
    return absl::OkStatus();
  };
  auto with = *CallbackCommunicator::Create(0, 2, std::move(fns));
  ASSERT_TRUE(with->AllToAll(send.data(), recv.data(), 4, DType::kBF16, nullptr).ok());
  EXPECT_EQ(log, std::vector<std::string>{"all_to_all 4 bf16"});
}

TEST(CallbackCommunicator, RefusesABadRankOrAMissingCollective) {
  std::vector<std::string> log;
  EXPECT_TRUE(absl::IsInvalidArgument(CallbackCommunicator::Create(2, 2, Logging(&log)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CallbackCommunicator::Create(0, 0, Logging(&log)).status()));
  CallbackCollectives no_barrier = Logging(&log);
  no_barrier.barrier = nullptr;
  const absl::Status missing = CallbackCommunicator::Create(0, 2, std::move(no_barrier)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(missing)) << missing;
  EXPECT_NE(missing.message().find("barrier"), std::string::npos) << missing;
  EXPECT_TRUE(CallbackCommunicator::Create(1, 2, Logging(&log)).ok()) << "abort is optional";
}

TEST(CallbackCommunicator, EachFunctionGetsItsCallInCppTypes) {
  std::vector<std::string> log;
  auto comm = *CallbackCommunicator::Create(1, 2, Logging(&log));
  std::vector<float> send(8), recv(8);
  ASSERT_TRUE(comm->AllGather(send.data(), recv.data(), 4, DType::kF32, nullptr).ok());
  ASSERT_TRUE(
      comm->ReduceScatter(send.data(), recv.data(), 4, DType::kBF16, ReduceOp::kAvg, nullptr)
          .ok());
  ASSERT_TRUE(
      comm->AllReduce(send.data(), recv.data(), 8, DType::kF16, ReduceOp::kMax, nullptr).ok());
  ASSERT_TRUE(comm->Broadcast(send.data(), recv.data(), 8, DType::kF32, 1, nullptr).ok());
  ASSERT_TRUE(comm->Barrier(nullptr).ok());
  EXPECT_EQ(log, (std::vector<std::string>{
                     absl::StrFormat("all_gather 4 f32 %p", nullptr), "reduce_scatter 4 bf16 avg",
                     "all_reduce 8 f16 max", "broadcast 8 f32 root 1", "barrier"}));
}

// A function's error keeps its code, gains the rank and the call, fails the
// communicator for good and is told to abort once.
TEST(CallbackCommunicator, AFunctionsErrorFailsTheCommunicatorOnce) {
  std::vector<std::string> log, aborts;
  CallbackCollectives fns = Logging(&log);
  fns.all_reduce = [](const void*, void*, size_t, DType, ReduceOp, void*) {
    return absl::UnavailableError("the store is gone");
  };
  fns.abort = [&aborts](std::string_view reason) { aborts.emplace_back(reason); };
  auto comm = *CallbackCommunicator::Create(1, 2, std::move(fns));
  float buf[4] = {};
  const absl::Status failed = comm->AllReduce(buf, buf, 4, DType::kF32, ReduceOp::kSum, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_EQ(failed.message(), "rank 1: the " +
                                  CollectiveCall::AllReduce(4, DType::kF32, ReduceOp::kSum)
                                      .ToString() +
                                  " callback failed: the store is gone");
  EXPECT_EQ(comm->AsyncError(), failed);
  EXPECT_EQ(comm->Barrier(nullptr), failed);
  comm->Abort(absl::CancelledError("again"));
  EXPECT_EQ(aborts, std::vector<std::string>{std::string(failed.message())});
  EXPECT_TRUE(log.empty()) << "the barrier reached its function";
}

}  // namespace
}  // namespace zero
