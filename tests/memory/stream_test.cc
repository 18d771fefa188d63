#include <atomic>
#include <vector>

#include <latch>
#include "gtest/gtest.h"
#include "memory/host_stream.h"

namespace zero {
namespace {

TEST(HostStreamTest, RunsWorkInOrder) {
  HostStream stream(0);
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(stream.Enqueue([&order, i] { order.push_back(i); }).ok());
  }
  ASSERT_TRUE(stream.Synchronize().ok());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(HostStreamTest, EventOrdersWorkAcrossStreams) {
  HostStream producer(0), consumer(0);
  std::latch release(1);
  std::atomic<int> value{0};
  // The producer is held until `release`, so without the event the consumer
  // would read 0.
  ASSERT_TRUE(producer.Enqueue([&] { release.wait(); value = 42; }).ok());
  auto event = producer.Record();
  ASSERT_TRUE(event.ok());
  EXPECT_FALSE((*event)->Query());
  ASSERT_TRUE(consumer.Wait(*event).ok());
  int seen = -1;
  ASSERT_TRUE(consumer.Enqueue([&] { seen = value.load(); }).ok());
  release.count_down();
  ASSERT_TRUE(consumer.Synchronize().ok());
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE((*event)->Query());
}

TEST(HostStreamTest, CopyAndFillAreOrdered) {
  HostStream stream(0);
  std::vector<unsigned char> a(1000, 0), b(1000, 0);
  ASSERT_TRUE(stream.Fill(a.data(), 7, a.size()).ok());
  ASSERT_TRUE(stream.Copy(b.data(), a.data(), a.size()).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(b, std::vector<unsigned char>(1000, 7));
}

TEST(HostStreamTest, DestructorDrainsQueue) {
  std::atomic<int> ran{0};
  {
    HostStream stream(0);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(stream.Enqueue([&] { ++ran; }).ok());
  }
  EXPECT_EQ(ran.load(), 10);
}

TEST(HostStreamTest, NullEventIsAnError) {
  HostStream stream(0);
  EXPECT_EQ(stream.Wait(nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetaStreamTest, CompletesAtOnce) {
  MetaStream stream(3);
  int ran = 0;
  ASSERT_TRUE(stream.Enqueue([&] { ++ran; }).ok());
  EXPECT_EQ(ran, 1);
  auto event = stream.Record();
  ASSERT_TRUE(event.ok());
  EXPECT_TRUE((*event)->Query());
  EXPECT_EQ(stream.device(), 3);
}

}  // namespace
}  // namespace zero
