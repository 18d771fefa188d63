// The engine's memory comes from the resources it is given (EngineMemory):
// an adaptor over the device pool caps or observes it, and one pinned host
// pool serves both an offloading engine and a pager.
#include <memory>
#include <span>
#include <vector>

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/limiting_adaptor.h"
#include "memory/statistics_adaptor.h"
#include "offload/host_pool.h"
#include "offload/pager.h"
#include "optimizers/adam.h"
#include "zero/comm/local_communicator.h"
#include "zero/engine.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

std::vector<ParamSpec> Specs() { return {{"a", 100'000, 0}, {"b", 50'000, 1}}; }

class EngineResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
    comm_ = std::move((*LocalGroup::Create(1))[0]);
  }
  absl::StatusOr<std::unique_ptr<Engine>> Create(EngineConfig config, EngineMemory memory) {
    return Engine::Create(config, Specs(), adam_.get(), comm_.get(), devices_.get(), 0, memory);
  }
  // One micro-batch of gradients and a step.
  static absl::Status TrainOneStep(Engine& engine) {
    std::vector<float> g(100'000, 0.5f);
    for (int id = 1; id >= 0; --id) {
      absl::Status s = engine.AddGrad(id, std::span<const float>(g.data(), Specs()[id].numel));
      if (!s.ok()) return s;
    }
    return engine.Step();
  }
  std::unique_ptr<DeviceSystem> devices_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Optimizer> adam_ = *MakeAdamW();
};

TEST_F(EngineResourceTest, EveryDeviceBufferGoesThroughTheGivenResource) {
  StatisticsAdaptor counted(&devices_->pool(0));
  EngineConfig config;
  config.stage = 2;
  auto engine = Create(config, {.device = &counted});
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE(TrainOneStep(**engine).ok());
  const ResourceStatistics s = counted.statistics();
  // Parameters (fp32, whole) + Adam's two moments: 12 bytes per element at least.
  EXPECT_GE(s.tag_bytes[static_cast<int>(Tag::kParameters)].peak, 150'000 * 4);
  EXPECT_GE(s.tag_bytes[static_cast<int>(Tag::kOptimizerState)].peak, 150'000 * 8);
  // Nothing reached the pool around the adaptor: the two agree byte for byte.
  EXPECT_EQ(static_cast<size_t>(s.bytes.current), devices_->pool(0).stats().requested);
}

TEST_F(EngineResourceTest, ALimitingAdaptorCapsTheEngine) {
  LimitingAdaptor capped(&devices_->pool(0), 1 * kMiB);  // the states need ~1.8 MB
  EngineConfig config;
  config.stage = 2;
  auto engine = Create(config, {.device = &capped});
  ASSERT_EQ(engine.status().code(), absl::StatusCode::kResourceExhausted) << engine.status();
  EXPECT_THAT(std::string(engine.status().message()), HasSubstr("limit of 1.00 MiB"));
  EXPECT_EQ(devices_->pool(0).stats().allocated, 0u) << "the failed engine freed what it had";
}

TEST_F(EngineResourceTest, TheEngineAndAPagerShareOnePinnedPool) {
  auto pinned = *PinnedHostPool::Create(devices_.get(), 16 * kMiB, {.arena_bytes = 4 * kMiB});
  EngineConfig config;
  config.stage = 2;
  config.offload = Offload::kOptimizer;
  auto engine = Create(config, {.host = pinned.get()});
  ASSERT_TRUE(engine.ok()) << engine.status();
  const size_t engine_bytes = pinned->stats().requested;
  // fp32 master weights and two moments of 150,000 elements.
  EXPECT_GE(engine_bytes, 150'000u * 12);
  EXPECT_EQ((*engine)->stats().host_bytes, engine_bytes);

  auto pager = Pager::Create(devices_.get(), 0, pinned.get(), {.budget_bytes = 16 * kMiB});
  ASSERT_TRUE(pager.ok()) << pager.status();
  auto tensor = (*pager)->Register(2 * kMiB, Tag::kActivations, "activations");
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(pinned->stats().requested, engine_bytes + 2 * kMiB) << "one pool, both users";
  ASSERT_TRUE(TrainOneStep(**engine).ok());
  ASSERT_TRUE((*pager)->Unregister(*tensor).ok());

  // A pool too small for both: the pager's request is the one refused.
  auto big = (*pager)->Register(15 * kMiB, Tag::kActivations, "too much");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  engine->reset();
  EXPECT_EQ(pinned->stats().requested, 0u) << "the engine gave its host memory back";
}

TEST_F(EngineResourceTest, AnEngineOwnedHostPoolRespectsHostCapacity) {
  EngineConfig config;
  config.stage = 2;
  config.offload = Offload::kOptimizer;
  config.host_capacity = 1 * kMiB;
  auto engine = Create(config, {});
  ASSERT_EQ(engine.status().code(), absl::StatusCode::kResourceExhausted) << engine.status();
  EXPECT_THAT(std::string(engine.status().message()), HasSubstr("pinned host pool"));
}

}  // namespace
}  // namespace zero
