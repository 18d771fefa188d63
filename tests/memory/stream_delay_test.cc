// The seeded delay mode of host streams and the switch that drops one event
// wait: together they make a missing Stream::Wait fail a test.
#include "memory/stream_delay.h"

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/host_stream.h"
#include "memory/testing/stream_faults.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

std::vector<absl::Duration> Draw(const HostStreamOptions& options, int device, int index) {
  DelaySequence delays(options, device, index);
  std::vector<absl::Duration> out;
  for (int i = 0; i < 64; ++i) out.push_back(delays.Next());
  return out;
}

TEST(DelaySequenceTest, IsSeededPerDeviceAndStream) {
  const HostStreamOptions options{.delay_seed = 7,
                                  .min_delay = absl::Microseconds(10),
                                  .max_delay = absl::Microseconds(90)};
  const std::vector<absl::Duration> first = Draw(options, 0, 0);
  EXPECT_EQ(first, Draw(options, 0, 0)) << "same seed, device and stream: same delays";
  EXPECT_NE(first, Draw(options, 0, 1));
  EXPECT_NE(first, Draw(options, 1, 0));
  EXPECT_NE(first, Draw({.delay_seed = 8, .min_delay = options.min_delay,
                         .max_delay = options.max_delay}, 0, 0));
  for (absl::Duration d : first) {
    EXPECT_GE(d, options.min_delay);
    EXPECT_LE(d, options.max_delay);
  }
  EXPECT_EQ(Draw({}, 0, 0), std::vector<absl::Duration>(64)) << "off by default";
}

TEST(DelaySequenceTest, ParsesTheEnvironmentForm) {
  auto parsed = ParseHostStreamDelay("7");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->delay_seed, 7u);
  EXPECT_EQ(parsed->max_delay, kDefaultMaxHostStreamDelay);
  parsed = ParseHostStreamDelay("12:500");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->delay_seed, 12u);
  EXPECT_EQ(parsed->max_delay, absl::Microseconds(500));
  EXPECT_FALSE(ParseHostStreamDelay("")->delayed());
  EXPECT_FALSE(ParseHostStreamDelay("off")->delayed());
  for (const char* bad : {"x", "-1", "7:", "7:0", "7:abc", "7:2000000", "7:5:6"}) {
    absl::Status status = ParseHostStreamDelay(bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(status.message()), HasSubstr("SEED[:MAX_US]")) << bad;
  }
}

// Sets an environment variable for one scope, restoring what was there (a
// suite may itself run under ZERO_HOST_STREAM_DELAY).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DelaySequenceTest, DeviceSystemReadsTheEnvironmentForHostDevices) {
  {
    ScopedEnv env(kHostStreamDelayVariable, "5:250");
    auto host = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 16 * kMiB});
    ASSERT_TRUE(host.ok()) << host.status();
    EXPECT_EQ((*host)->host_streams().delay_seed, 5u);
    EXPECT_EQ((*host)->host_streams().max_delay, absl::Microseconds(250));
    auto given = DeviceSystem::CreateWithHostStreams(
        {DeviceSpec::Kind::kHost, 1, 16 * kMiB},
        {.delay_seed = 9, .min_delay = absl::ZeroDuration(), .max_delay = absl::Microseconds(3)});
    ASSERT_TRUE(given.ok()) << given.status();
    EXPECT_EQ((*given)->host_streams().delay_seed, 9u) << "options given win";
    auto meta = DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 16 * kMiB});
    ASSERT_TRUE(meta.ok()) << meta.status();
    EXPECT_FALSE((*meta)->host_streams().delayed()) << "meta streams run nothing";
  }
  ScopedEnv env(kHostStreamDelayVariable, "seven");
  auto bad = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 16 * kMiB});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("$ZERO_HOST_STREAM_DELAY"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'seven'"));
}

TEST(DelaySequenceTest, EachTaskWaitsItsDelay) {
  HostStream stream(0, {.delay_seed = 1,
                        .min_delay = absl::Milliseconds(2),
                        .max_delay = absl::Milliseconds(2)});
  const absl::Time start = absl::Now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(stream.Enqueue([] {}).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(10));
}

// The producer's every task sleeps at least 50 ms first, the consumer's not
// at all: a consumer that does not wait for the producer's event reads before
// the write, every time.
int ProduceThenConsume() {
  HostStream producer(0, {.delay_seed = 42,
                          .min_delay = absl::Milliseconds(50),
                          .max_delay = absl::Milliseconds(60)});
  HostStream consumer(0);
  std::atomic<int> value{0};
  int seen = -1;
  EXPECT_TRUE(producer.Enqueue([&] { value = 42; }).ok());
  absl::StatusOr<std::shared_ptr<Event>> written = producer.Record();
  EXPECT_TRUE(written.ok());
  EXPECT_TRUE(consumer.Wait(*written).ok());
  EXPECT_TRUE(consumer.Enqueue([&] { seen = value.load(); }).ok());
  EXPECT_TRUE(consumer.Synchronize().ok());
  EXPECT_TRUE(producer.Synchronize().ok());
  return seen;
}

TEST(DroppedStreamWaitTest, TheEventOrdersTheConsumerUnderDelays) {
  EXPECT_EQ(ProduceThenConsume(), 42);
}

TEST(DroppedStreamWaitTest, DroppingTheWaitMakesTheConsumerReadEarly) {
  DroppedStreamWait drop(1);
  EXPECT_NE(ProduceThenConsume(), 42) << "the check could not fail";
  EXPECT_TRUE(drop.dropped());
  EXPECT_EQ(drop.waits_seen(), 1);
}

TEST(DroppedStreamWaitTest, CountsOnlyTheChosenStreamAndDisarms) {
  HostStream a(0), b(0);
  auto event = a.Record();
  ASSERT_TRUE(event.ok());
  {
    DroppedStreamWait drop(2, &b);
    ASSERT_TRUE(a.Wait(*event).ok());
    ASSERT_TRUE(b.Wait(*event).ok());
    EXPECT_FALSE(drop.dropped());
    ASSERT_TRUE(b.Wait(*event).ok());
    EXPECT_TRUE(drop.dropped());
    EXPECT_EQ(drop.waits_seen(), 2) << "waits on `a` do not count";
  }
  DroppedStreamWait later(0);
  ASSERT_TRUE(b.Wait(*event).ok());
  EXPECT_EQ(later.waits_seen(), 0) << "n = 0 arms nothing";
}

}  // namespace
}  // namespace zero
