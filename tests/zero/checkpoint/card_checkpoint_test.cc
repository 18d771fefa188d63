// Checkpoints of an engine on a card, as bench/card_check.sh runs them (one
// rank on the card): a Save (device-to-host copies on the engine's stream),
// an async save while training goes on (the snapshot copies device memory
// into pinned host buffers on a CUDA stream of its own, and the next Step
// waits for it), and a Load into the card. Host clusters read the files
// back: the async save holds exactly the state at its Start. Skips without
// a card.
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "tests/zero/checkpoint/expect.h"
#include "zero/checkpoint/checkpoint.h"

namespace zero::testing_model {
namespace {

bool HasCard() {
  DeviceSpec spec;
  spec.kind = DeviceSpec::Kind::kCuda;
  return DeviceSystem::Create(spec).ok();
}

// The states a 2-rank host cluster loads from `path`.
ModelStates Loaded(const Model& model, const std::string& path) {
  auto cluster = Cluster::Create(model, SmallRun(2, 2), AdamW());
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(AllOk((*cluster)->Load(path)).ok());
  return *(*cluster)->States();
}

TEST(CardCheckpoint, AnAsyncSaveOnTheCardHoldsItsStart) {
  if (!HasCard()) GTEST_SKIP() << "no card";
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(1, 2);
  run.kind = DeviceSpec::Kind::kCuda;
  auto card = Cluster::Create(*model, run, AdamW());
  ASSERT_TRUE(card.ok()) << card.status();
  ASSERT_TRUE((*card)->Train(0, 1).ok());
  const std::string at_start = FreshDir("card_sync"), async = FreshDir("card_async"),
                    after = FreshDir("card_after"), reloaded = FreshDir("card_reloaded");
  ASSERT_TRUE(AllOk((*card)->Save(at_start)).ok());
  checkpoint::AsyncSaver saver((*card)->participant(0));
  ASSERT_TRUE(saver.Start(async).ok());
  ASSERT_TRUE((*card)->Train(1, 3).ok());  // Step waits for the snapshot's copy
  ASSERT_TRUE(saver.Wait().ok());
  EXPECT_GT((*card)->engine(0).stats().owned_state_wait_seconds, 0.0);
  ASSERT_TRUE(AllOk((*card)->Save(after)).ok());
  const ModelStates start = Loaded(*model, at_start);
  ExpectStatesIdentical(start, Loaded(*model, async), "the async save");
  ASSERT_NE(Hash(Loaded(*model, after)), Hash(start)) << "the steps changed the state";
  ASSERT_TRUE(AllOk((*card)->Load(at_start)).ok());
  ASSERT_TRUE(AllOk((*card)->Save(reloaded)).ok());
  ExpectStatesIdentical(start, Loaded(*model, reloaded), "loaded into the card");
}

}  // namespace
}  // namespace zero::testing_model
