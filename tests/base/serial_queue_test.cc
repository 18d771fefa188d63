#include "base/serial_queue.h"

#include <atomic>
#include <chrono>
#include <future>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(SerialQueue, RunsRequestsOneAtATimeInTheOrderSubmitted) {
  std::unique_ptr<SerialQueue> io = SerialQueue::Create().value();
  std::vector<int> order;  // written only by the queue's thread
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

TEST(SerialQueue, EveryRequestRunsAndReturnsItsOwnStatus) {
  std::unique_ptr<SerialQueue> io = SerialQueue::Create().value();
  std::future<absl::Status> failed =
      io->Submit([] { return absl::DataLossError("the disk said no"); });
  std::future<absl::Status> next = io->Submit([] { return absl::OkStatus(); });
  EXPECT_EQ(failed.get().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(next.get().ok()) << "a failed request stopped the next one";
}

TEST(SerialQueue, ARequestThatThrowsIsAnInternalStatusNotAnException) {
  std::unique_ptr<SerialQueue> io = SerialQueue::Create().value();
  std::future<absl::Status> threw =
      io->Submit([]() -> absl::Status { throw std::bad_alloc(); });
  std::future<absl::Status> next = io->Submit([] { return absl::OkStatus(); });
  absl::Status status;
  EXPECT_NO_THROW(status = threw.get());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(next.get().ok());
}

TEST(SerialQueue, DestroyingItRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  std::vector<std::future<absl::Status>> done;
  {
    std::unique_ptr<SerialQueue> io = SerialQueue::Create().value();
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

// Drain returns once what was posted before it ran, not later work: a
// gate holds the first item, so Drain cannot return before it is opened.
TEST(SerialQueue, DrainWaitsForWhatWasPostedBeforeIt) {
  SerialQueue queue;
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  std::atomic<int> ran{0};
  queue.Post([opened, &ran] {
    opened.wait();
    ++ran;
  });
  queue.Post([&ran] { ++ran; });
  std::future<void> drained = std::async(std::launch::async, [&] { queue.Drain(); });
  EXPECT_EQ(drained.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "Drain returned while posted work was held";
  gate.set_value();
  drained.get();
  EXPECT_EQ(ran.load(), 2);
}

// The hooks run on the queue's thread around every item, in order.
TEST(SerialQueue, HooksRunAroundEveryItem) {
  std::vector<char> trace;  // written only by the queue's thread until Drain
  {
    SerialQueue queue({.before = [&] { trace.push_back('<'); },
                       .after = [&] { trace.push_back('>'); }});
    for (int i = 0; i < 3; ++i) queue.Post([&, i] { trace.push_back(char('0' + i)); });
    queue.Drain();
  }
  EXPECT_EQ(std::string(trace.begin(), trace.end()), "<0><1><2>");
}

}  // namespace
}  // namespace zero
