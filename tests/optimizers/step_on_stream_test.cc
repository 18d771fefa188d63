// The stream-ordered step (Optimizer::Step(args, kind, stream)): on a host
// stream it is a task in the stream's order, bit for bit the blocking
// step's, with the hyper-parameters of the moment it was enqueued; on meta
// devices it does nothing; bad arguments are refused before anything is
// enqueued.
#include <future>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "memory/host_stream.h"
#include "optimizers/adam.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

constexpr size_t kN = 1000;

struct Slice {
  explicit Slice(uint32_t seed)
      : p(RandomFloats(kN, seed)), g(RandomFloats(kN, seed + 1)), m(kN, 0.0f), v(kN, 0.0f) {}
  // The state span array lives only as long as the call that passes it.
  StepArgs Args(std::vector<std::span<float>>& state, int64_t step) {
    state = {m, v};
    return StepArgs{.params = p, .grads = g.data(), .state = state, .step = step};
  }
  std::vector<float> p, g, m, v;
};

// A host stream whose next task waits for the gate: work enqueued behind it
// has certainly not run until the gate opens.
struct HeldStream {
  HeldStream() {
    EXPECT_TRUE(stream.Enqueue([opened = gate.get_future().share()] { opened.wait(); }).ok());
  }
  void Open() { gate.set_value(); }
  std::promise<void> gate;
  HostStream stream{0};
};

TEST(StepOnStream, AHostStepRunsInStreamOrderWithTheBlockingStepsBits) {
  auto adam = MakeAdamW();
  ASSERT_TRUE(adam.ok());
  Slice reference(7), ordered(7);
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<std::span<float>> state;
    ASSERT_TRUE((*adam)->Step(reference.Args(state, step)).ok());
    const std::vector<float> before = ordered.p;
    HeldStream held;
    {
      std::vector<std::span<float>> gone;  // gone before the step runs
      ASSERT_TRUE((*adam)->Step(ordered.Args(gone, step), DeviceKind::kHost, &held.stream).ok());
    }
    EXPECT_TRUE(SameBits(ordered.p, before)) << "ran before the stream's earlier work";
    held.Open();
    ASSERT_TRUE(held.stream.Synchronize().ok());
  }
  EXPECT_TRUE(SameBits(ordered.p, reference.p));
  EXPECT_TRUE(SameBits(ordered.m, reference.m));
  EXPECT_TRUE(SameBits(ordered.v, reference.v));
}

// A card's kernel gets its constants at launch; a host task gets them when
// it is enqueued: set_lr meanwhile is the next step's.
TEST(StepOnStream, SetLrAfterEnqueueingChangesOnlyLaterSteps) {
  auto ordered_sgd = MakeSgd({.lr = 0.5});
  auto reference_sgd = MakeSgd({.lr = 0.5});
  ASSERT_TRUE(ordered_sgd.ok() && reference_sgd.ok());
  std::vector<float> p(kN, 1.0f), q(kN, 1.0f), g = RandomFloats(kN, 3);
  const StepArgs ordered{.params = p, .grads = g.data(), .state = {}, .step = 1};
  const StepArgs reference{.params = q, .grads = g.data(), .state = {}, .step = 1};
  HeldStream held;
  ASSERT_TRUE((*ordered_sgd)->Step(ordered, DeviceKind::kHost, &held.stream).ok());
  ASSERT_TRUE((*ordered_sgd)->set_lr(100.0).ok());
  held.Open();
  ASSERT_TRUE(held.stream.Synchronize().ok());
  ASSERT_TRUE((*reference_sgd)->Step(reference).ok());
  EXPECT_TRUE(SameBits(p, q)) << "the queued step used the lr set after it was enqueued";
}

TEST(StepOnStream, MetaDevicesDoNothing) {
  auto adam = MakeAdam();
  ASSERT_TRUE(adam.ok());
  Slice s(11);
  const std::vector<float> before = s.p;
  std::vector<std::span<float>> state;
  HostStream stream(0);  // any stream: nothing is enqueued on it
  ASSERT_TRUE((*adam)->Step(s.Args(state, 1), DeviceKind::kMeta, &stream).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(SameBits(s.p, before));
}

TEST(StepOnStream, BadArgumentsAreRefusedBeforeAnythingIsEnqueued) {
  auto adam = MakeAdam();
  ASSERT_TRUE(adam.ok());
  Slice s(13);
  const std::vector<float> before = s.p;
  std::vector<std::span<float>> state;
  StepArgs bad = s.Args(state, 0);  // step 0
  HostStream stream(0);
  for (DeviceKind kind : {DeviceKind::kHost, DeviceKind::kCuda, DeviceKind::kMeta}) {
    EXPECT_EQ((*adam)->Step(bad, kind, &stream).code(), absl::StatusCode::kInvalidArgument)
        << DeviceKindName(kind);
  }
  EXPECT_EQ((*adam)->Step(s.Args(state, 1), DeviceKind::kHost, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(SameBits(s.p, before));
}

}  // namespace
}  // namespace zero::testing
