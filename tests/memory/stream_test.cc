#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <latch>
#include "gtest/gtest.h"
#include "memory/event_pool.h"
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

// The source may be reused as soon as CopyFromPageable returns, whether the
// stream is busy (staged, ordered after the held task) or idle (copied now).
TEST(HostStreamTest, CopyFromPageableLetsTheCallerReuseTheSource) {
  HostStream stream(0);
  std::latch release(1);
  std::vector<int> dst(1000, -1);
  std::vector<int> seen_before_copy;
  ASSERT_TRUE(stream.Enqueue([&] { release.wait(); seen_before_copy = dst; }).ok());
  for (int round = 0; round < 3; ++round) {  // the second and third reuse the staging
    std::vector<int> src(1000, round);
    ASSERT_TRUE(stream.CopyFromPageable(dst.data(), src.data(), src.size() * sizeof(int)).ok());
    std::fill(src.begin(), src.end(), 99);  // the caller's buffer, reused at once
  }
  EXPECT_EQ(dst, std::vector<int>(1000, -1));  // busy: nothing copied yet
  release.count_down();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(seen_before_copy, std::vector<int>(1000, -1));
  EXPECT_EQ(dst, std::vector<int>(1000, 2));  // the last round, in order

  std::vector<int> src(1000, 7);  // idle now
  ASSERT_TRUE(stream.CopyFromPageable(dst.data(), src.data(), src.size() * sizeof(int)).ok());
  std::fill(src.begin(), src.end(), 99);
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(dst, std::vector<int>(1000, 7));
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

// A record allocates nothing once the stream is warm: events nobody holds
// any more are re-armed, and an idle stream's record is one shared event.
TEST(HostStreamTest, RecordsRecycleEvents) {
  HostStream stream(0);
  std::latch release(1);
  ASSERT_TRUE(stream.Enqueue([&] { release.wait(); }).ok());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(stream.Enqueue([] {}).ok());
    auto event = stream.Record();
    ASSERT_TRUE(event.ok());
    EXPECT_FALSE((*event)->Query());
  }
  EXPECT_EQ(stream.events_created(), 8u) << "the first batch, never more";
  release.count_down();
  ASSERT_TRUE(stream.Synchronize().ok());
  auto idle = stream.Record();
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE((*idle)->Query());
  EXPECT_EQ(stream.Record()->get(), idle->get()) << "held, yet shared: the complete event";
  EXPECT_EQ(stream.events_created(), 8u);
}

// A held event is never re-armed, so its holder sees exactly the work it
// recorded, however many records follow.
TEST(HostStreamTest, AHeldEventIsNotConfusedByReuse) {
  HostStream stream(0);
  std::latch first(1), second(1);
  ASSERT_TRUE(stream.Enqueue([&] { first.wait(); }).ok());
  auto held = stream.Record();
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(stream.Enqueue([&] { second.wait(); }).ok());
  std::shared_ptr<Event> later;
  for (int i = 0; i < 10; ++i) {
    auto event = stream.Record();
    ASSERT_TRUE(event.ok());
    EXPECT_NE(event->get(), held->get());
    later = *event;
  }
  EXPECT_FALSE((*held)->Query());
  first.count_down();
  // Polled, not synchronized: a re-armed event would wait for `second` and
  // hang instead of failing.
  bool done = false;
  for (int i = 0; i < 2000 && !done; ++i) {
    done = (*held)->Query();
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(done) << "the held event now stands for later work";
  EXPECT_FALSE(later->Query()) << "the later record covers the second task too";
  second.count_down();
  ASSERT_TRUE(later->Synchronize().ok());
  EXPECT_EQ(stream.events_created(), 8u);
}

TEST(HostStreamTest, EventsOutliveTheirStream) {
  std::shared_ptr<Event> event;
  {
    HostStream stream(0);
    ASSERT_TRUE(stream.Enqueue([] {}).ok());
    event = *stream.Record();
  }
  EXPECT_TRUE(event->Query());
  EXPECT_TRUE(event->Synchronize().ok());
}

// The pool keeps all it made, so once the most events ever held at once
// exist, records create none: no event is made and destroyed per step.
TEST(EventPoolTest, ReusesOnlyWhatNobodyHoldsAndKeepsEverythingItMade) {
  EventPool<int> pool;
  int made = 0;
  auto make = [&] {
    ++made;
    return absl::StatusOr<std::shared_ptr<int>>(std::make_shared<int>(0));
  };
  for (int round = 0; round < 3; ++round) {
    std::vector<std::shared_ptr<int>> held;
    for (int i = 0; i < 40; ++i) held.push_back(*pool.Acquire(make));
    for (size_t i = 1; i < held.size(); ++i) EXPECT_NE(held[i], held[i - 1]);
  }
  EXPECT_EQ(made, 64) << "8 at first, then doubling past the 40 held at once";
  EXPECT_EQ(pool.created(), 64u) << "rounds 2 and 3 made none (a cap of 32 would make 8 each)";
  // All held: a new one must be made, and its error comes back.
  std::vector<std::shared_ptr<int>> all;
  for (int i = 0; i < 64; ++i) all.push_back(*pool.Acquire(make));
  auto failing = [] { return absl::StatusOr<std::shared_ptr<int>>(absl::InternalError("no")); };
  EXPECT_EQ(pool.Acquire(failing).status().code(), absl::StatusCode::kInternal);
}

// Every verb counts where the engine reads its per-step figures
// (stream_counts.h): enqueued work, host waits, driver calls.
TEST(HostStreamTest, CountsEnqueuedWorkHostWaitsAndDriverCalls) {
  HostStream stream(0);
  auto counts = std::make_shared<StreamCounts>();
  stream.CountInto(counts);
  std::vector<char> a(64, 1), b(64, 0);
  std::latch release(1);
  ASSERT_TRUE(stream.Enqueue([&] { release.wait(); }).ok());
  ASSERT_TRUE(stream.Copy(b.data(), a.data(), 64).ok());
  ASSERT_TRUE(stream.Fill(b.data(), 0, 8).ok());
  ASSERT_TRUE(stream.CopyFromPageable(b.data(), a.data(), 64).ok());  // busy: staged
  EXPECT_EQ(counts->Read(), (StreamOps{.enqueued = 4, .host_waits = 0, .driver_calls = 1}))
      << "one staging buffer made";
  auto event = stream.Record();  // busy: a pooled event, made once
  ASSERT_TRUE(event.ok());
  HostStream other(0);
  other.CountInto(counts);
  ASSERT_TRUE(other.Wait(*event).ok());  // the other stream's worker waits, not the host
  EXPECT_EQ(counts->Read().host_waits, 0u);
  EXPECT_EQ(counts->Read().driver_calls, 9u) << "a staging buffer and the first 8 events";
  release.count_down();
  ASSERT_TRUE((*event)->Synchronize().ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  ASSERT_TRUE(other.Synchronize().ok());
  EXPECT_EQ(counts->Read().host_waits, 3u);
  // Warm: the same work again makes nothing new.
  *event = nullptr;
  const StreamOps before = counts->Read();
  ASSERT_TRUE(stream.Enqueue([] {}).ok());
  ASSERT_TRUE(stream.CopyFromPageable(b.data(), a.data(), 64).ok());
  auto again = stream.Record();
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(counts->Read() - before,
            (StreamOps{.enqueued = 2, .host_waits = 1, .driver_calls = 0}));
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
  EXPECT_EQ(stream.Record()->get(), event->get()) << "one shared complete event";
}

}  // namespace
}  // namespace zero
