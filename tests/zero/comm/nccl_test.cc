// The NCCL backend: without a card (every CI run) creation says Unavailable;
// with one card and libnccl, one rank runs every verb.
#include <cuda_runtime_api.h>

#include <vector>

#include "gtest/gtest.h"
#include "memory/host_stream.h"
#include "zero/comm/nccl_api.h"
#include "zero/comm/nccl_communicator.h"

namespace zero {
namespace {

TEST(NcclTest, LoadsOrSaysUnavailable) {
  auto api = nccl::GetNcclApi();
  if (!api.ok()) {
    EXPECT_TRUE(absl::IsUnavailable(api.status())) << api.status();
    GTEST_SKIP() << api.status();
  }
  EXPECT_GE((*api)->version, 21000);
  EXPECT_EQ(nccl::ToNccl(DType::kBF16), ncclBfloat16);
  EXPECT_EQ(nccl::ToNccl(ReduceOp::kAvg), ncclAvg);
}

TEST(NcclTest, RejectsBadArgumentsBeforeTouchingCards) {
  EXPECT_TRUE(absl::IsInvalidArgument(NcclGroup::CreateAll({}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NcclGroup::CreateAll({0}, {.check_every = -1}).status()));
  const FileRendezvous r{.path = "/nonexistent/id"};
  EXPECT_TRUE(absl::IsInvalidArgument(NcclGroup::CreateMultiNode(3, 2, r, {0}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(NcclGroup::CreateMultiNode(0, 1, r, {0, 1}).status()));
}

bool HaveCard() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(NcclTest, UnavailableWithoutACard) {
  if (HaveCard()) GTEST_SKIP() << "a card is present";
  EXPECT_TRUE(absl::IsUnavailable(NcclGroup::CreateAll({0}).status()));
  const FileRendezvous r{.path = "/nonexistent/id", .timeout = absl::Milliseconds(1)};
  EXPECT_TRUE(absl::IsUnavailable(NcclGroup::CreateMultiNode(0, 2, r, {0}).status()));
}

// What WrapNativeStream(d, nullptr) gives on a card: CUDA's legacy default
// stream (PyTorch's default), a card stream with a null handle.
class LegacyDefaultStream final : public Stream {
 public:
  int device() const override { return 0; }
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&>) override { return Unused(); }
  absl::Status DoCopy(void*, const void*, size_t) override { return Unused(); }
  absl::Status DoFill(void*, unsigned char, size_t) override { return Unused(); }
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override { return Unused(); }
  absl::Status DoWait(const std::shared_ptr<Event>&) override { return Unused(); }
  absl::Status DoSynchronize() override {
    return cudaDeviceSynchronize() == cudaSuccess ? absl::OkStatus()
                                                  : absl::InternalError("cudaDeviceSynchronize");
  }
  bool is_card() const override { return true; }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not used here"); }
};

// One rank on card 0: each verb is a copy (avg divides by 1).
TEST(NcclTest, OneRankRunsEveryVerbOnACard) {
  if (!HaveCard() || !nccl::GetNcclApi().ok()) GTEST_SKIP() << "needs a card and libnccl";
  for (int check_every : {0, 1}) {
    auto group = NcclGroup::CreateAll({0}, {.check_every = check_every});
    ASSERT_TRUE(group.ok()) << group.status();
    Communicator& comm = *(*group)[0];
    constexpr size_t kCount = 1 << 16;
    std::vector<float> host(kCount), back(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>(i % 1000) - 500;
    float *send = nullptr, *recv = nullptr;
    ASSERT_EQ(cudaMalloc(&send, kCount * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&recv, kCount * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(send, host.data(), kCount * 4, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_TRUE(comm.AllGather(send, recv, kCount, DType::kF32, nullptr).ok());
    EXPECT_TRUE(comm.ReduceScatter(recv, recv, kCount, DType::kF32, ReduceOp::kSum, nullptr).ok());
    EXPECT_TRUE(comm.AllReduce(recv, recv, kCount, DType::kF32, ReduceOp::kAvg, nullptr).ok());
    EXPECT_TRUE(comm.Broadcast(recv, recv, kCount, DType::kF32, 0, nullptr).ok());
    EXPECT_TRUE(comm.Barrier(nullptr).ok());
    ASSERT_EQ(cudaMemcpy(back.data(), recv, kCount * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, host);
    EXPECT_EQ(comm.stats().Total().calls, 5u);
    LegacyDefaultStream legacy;  // taken, not refused (the refusal failed the group)
    EXPECT_TRUE(comm.Barrier(&legacy).ok());
    EXPECT_TRUE(comm.AsyncError().ok());
    HostStream host_stream(0);  // not a CUDA stream: this rank's arguments are bad
    EXPECT_TRUE(absl::IsInvalidArgument(comm.Barrier(&host_stream)));
    EXPECT_FALSE(comm.Barrier(nullptr).ok());  // and the group is failed
    cudaFree(send);
    cudaFree(recv);
  }
}

}  // namespace
}  // namespace zero
