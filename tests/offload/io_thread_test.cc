#include "offload/internal/io_thread.h"

#include <atomic>
#include <future>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(IoThread, RunsRequestsOneAtATimeInTheOrderSubmitted) {
  std::unique_ptr<IoThread> io = IoThread::Create().value();
  std::vector<int> order;  // written only by the I/O thread
  std::atomic<int> running{0}, most{0};
  std::vector<std::future<absl::Status>> done;
  for (int i = 0; i < 64; ++i) {
    done.push_back(io->Submit([&, i] {
      most = std::max(most.load(), ++running);
      order.push_back(i);
      --running;
      return absl::OkStatus();
    }));
  }
  for (auto& d : done) EXPECT_TRUE(d.get().ok());
  ASSERT_EQ(order.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(most.load(), 1) << "two requests ran at once";
}

TEST(IoThread, EveryRequestRunsAndReturnsItsOwnStatus) {
  std::unique_ptr<IoThread> io = IoThread::Create().value();
  std::future<absl::Status> failed =
      io->Submit([] { return absl::DataLossError("the disk said no"); });
  std::future<absl::Status> next = io->Submit([] { return absl::OkStatus(); });
  EXPECT_EQ(failed.get().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(next.get().ok()) << "a failed request stopped the next one";
}

TEST(IoThread, ARequestThatThrowsIsAnInternalStatusNotAnException) {
  std::unique_ptr<IoThread> io = IoThread::Create().value();
  std::future<absl::Status> threw =
      io->Submit([]() -> absl::Status { throw std::bad_alloc(); });
  std::future<absl::Status> next = io->Submit([] { return absl::OkStatus(); });
  absl::Status status;
  EXPECT_NO_THROW(status = threw.get());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(next.get().ok());
}

TEST(IoThread, DestroyingItRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  std::vector<std::future<absl::Status>> done;
  {
    std::unique_ptr<IoThread> io = IoThread::Create().value();
    for (int i = 0; i < 16; ++i) {
      done.push_back(io->Submit([&] {
        ++ran;
        return absl::OkStatus();
      }));
    }
  }
  EXPECT_EQ(ran.load(), 16);
  for (auto& d : done) EXPECT_TRUE(d.get().ok());
}

}  // namespace
}  // namespace zero
