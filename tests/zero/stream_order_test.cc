// The engine's data plane on two streams per rank (compute and
// communication) with collectives that return once enqueued, on host
// streams that sleep a seeded random time before every operation: every
// stage, precision and mode must give exactly what the synchronous,
// one-stream run gives. And the check can fail: dropping the one event that
// orders a reduction after the gradients' copy gives wrong parameters.
#include <array>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "memory/testing/stream_faults.h"
#include "optimizers/adam.h"
#include "zero/comm/local_communicator.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"

namespace zero::testing_model {
namespace {

HostStreamOptions Delays(uint64_t seed) {
  return {.delay_seed = seed, .max_delay = absl::Microseconds(200)};
}

// The same run twice: on one stream, collectives done when they return;
// and overlapped on delayed streams, collectives enqueued.
void ExpectOverlappedMatchesSerialized(const Model& model, TrainingRun run) {
  run.config.overlap_comm = false;
  const std::vector<RankResult> serialized = TrainWithEngine(model, run, AdamW());
  run.config.overlap_comm = true;
  run.stream_ordered = true;
  run.host_streams = Delays(7);
  const std::vector<RankResult> overlapped = TrainWithEngine(model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    ASSERT_TRUE(serialized[r].status.ok()) << "rank " << r << ": " << serialized[r].status;
    ASSERT_TRUE(overlapped[r].status.ok()) << "rank " << r << ": " << overlapped[r].status;
    ExpectBitIdentical(serialized[r].params, overlapped[r].params, "rank " + std::to_string(r));
    EXPECT_EQ(serialized[r].losses, overlapped[r].losses) << "rank " << r;
  }
}

TrainingRun BaseRun(int stage, DType dtype, int gas) {
  TrainingRun run;
  run.world = 4;
  run.steps = 3;
  run.config.stage = stage;
  run.config.param_dtype = dtype;
  run.config.gradient_accumulation_steps = gas;
  run.config.bucket_elements = 300;  // several units, so reductions overlap backward
  run.config.persistence_threshold = 40;
  run.config.prefetch_elements = 1000;
  run.config.reduce_chunk_elements = 256;
  return run;
}

// stage, dtype, micro-batches
using Case = std::tuple<int, DType, int>;
class OverlappedStreams : public ::testing::TestWithParam<Case> {};

TEST_P(OverlappedStreams, MatchSerializedBitForBit) {
  const auto& [stage, dtype, gas] = GetParam();
  ExpectOverlappedMatchesSerialized(**MakeTransformer(2, 16, 2, 8, 2), BaseRun(stage, dtype, gas));
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto& [stage, dtype, gas] = info.param;
  return "stage" + std::to_string(stage) + "_" + std::string(Name(dtype)) + "_micro" +
         std::to_string(gas);
}

INSTANTIATE_TEST_SUITE_P(Engine, OverlappedStreams,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(1, 2)),
                         CaseName);

// The local backend's stream path (what a card runs: copies and sums as
// work on the engine's streams, zero/comm/internal/stream_mover.h) on
// delayed streams trains to the bits of the host path.
class MovedOnStreams : public ::testing::TestWithParam<Case> {};

TEST_P(MovedOnStreams, MatchTheHostPathBitForBit) {
  const auto& [stage, dtype, gas] = GetParam();
  auto model = MakeTransformer(2, 16, 2, 8, 2);
  TrainingRun run = BaseRun(stage, dtype, gas);
  run.config.max_grad_norm = 0.5;
  const std::vector<RankResult> host = TrainWithEngine(**model, run, AdamW());
  run.move_on_streams = true;
  run.host_streams = Delays(3);
  const std::vector<RankResult> streams = TrainWithEngine(**model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    ASSERT_TRUE(host[r].status.ok()) << "rank " << r << ": " << host[r].status;
    ASSERT_TRUE(streams[r].status.ok()) << "rank " << r << ": " << streams[r].status;
    ExpectBitIdentical(host[r].params, streams[r].params, "rank " + std::to_string(r));
    EXPECT_EQ(host[r].losses, streams[r].losses) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Engine, MovedOnStreams,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(2)),
                         CaseName);

TEST(OverlappedStreamsModes, ClippingAndLossScaling) {
  TrainingRun clipped = BaseRun(2, DType::kF32, 2);
  clipped.config.max_grad_norm = 0.05;
  ExpectOverlappedMatchesSerialized(**MakeMlp(16, 32, 8, 8), clipped);
  ExpectOverlappedMatchesSerialized(**MakeMlp(16, 32, 8, 8), BaseRun(1, DType::kF16, 2));
}

TEST(OverlappedStreamsModes, Offload) {
  TrainingRun optimizer = BaseRun(2, DType::kBF16, 2);
  optimizer.config.offload = Offload::kOptimizer;  // with the early CPU steps
  ExpectOverlappedMatchesSerialized(**MakeMlp(16, 32, 8, 8), optimizer);
  TrainingRun params = BaseRun(3, DType::kF32, 1);
  params.config.offload = Offload::kParameters;
  ExpectOverlappedMatchesSerialized(**MakeMlp(16, 32, 8, 8), params);
}

// Rank 0's compute stream is held up for 200 ms before its first gradient
// copy; only the event the reduction waits on keeps the reduce-scatter
// from reading the bucket before the copy. One parameter per unit, so the
// first unit reduced is complete with the first gradient handed over (no
// host read of a parameter, which would wait out the delay, in between).
TrainingRun DropRun() {
  TrainingRun run = BaseRun(2, DType::kF32, 1);
  run.world = 2;
  run.config.bucket_elements = 1;
  return run;
}

std::vector<RankResult> TrainWithSlowFirstCopy(bool drop_the_wait, bool* dropped) {
  std::unique_ptr<Model> model = *MakeMlp(16, 32, 8, 8);
  TrainingRun run = DropRun();
  run.stream_ordered = true;
  run.host_streams = Delays(3);
  std::array<Engine*, 2> engines{};
  std::optional<DroppedStreamWait> drop;
  run.before_training = [&](int rank, Engine& engine) {
    engines[rank] = &engine;
    // The first wait on rank 0's communication stream: its first reduction's.
    if (rank == 0 && drop_the_wait) drop.emplace(1, engine.comm_stream());
    return absl::OkStatus();
  };
  bool held = false;
  run.edit_grad = [&](int rank, int step, int, std::span<float>) {
    if (rank != 0 || step != 0 || held) return;
    held = true;
    (void)engines[0]->stream()->Enqueue([] { absl::SleepFor(absl::Milliseconds(200)); });
  };
  std::vector<RankResult> result = TrainWithEngine(*model, run, AdamW());
  *dropped = drop.has_value() && drop->dropped();
  return result;
}

TEST(OverlappedStreamsModes, DroppingTheReductionsWaitGivesWrongParameters) {
  std::unique_ptr<Model> model = *MakeMlp(16, 32, 8, 8);
  TrainingRun serial = DropRun();
  serial.config.overlap_comm = false;
  const std::vector<RankResult> expected = TrainWithEngine(*model, serial, AdamW());
  ASSERT_TRUE(expected[0].status.ok()) << expected[0].status;

  bool dropped = true;
  const std::vector<RankResult> ordered = TrainWithSlowFirstCopy(false, &dropped);
  ASSERT_TRUE(ordered[0].status.ok()) << ordered[0].status;
  ExpectBitIdentical(expected[0].params, ordered[0].params, "with the wait");

  const std::vector<RankResult> broken = TrainWithSlowFirstCopy(true, &dropped);
  EXPECT_TRUE(dropped);
  ASSERT_TRUE(broken[0].status.ok()) << broken[0].status;
  bool differs = false;
  for (size_t i = 0; i < expected[0].params.size(); ++i) {
    differs |= expected[0].params[i] != broken[0].params[i];
  }
  EXPECT_TRUE(differs) << "the reduction did not read the bucket early without its wait";
}

// One rank's engine on a delayed host device, collectives stream-ordered.
struct OneRank {
  OneRank(uint64_t delay_seed, const EngineConfig& config, std::vector<ParamSpec> specs)
      : devices(*DeviceSystem::CreateWithHostStreams({DeviceSpec::Kind::kHost, 1, 64 << 20},
                                                     Delays(delay_seed))),
        comms(*LocalGroup::Create(1, {.stream_ordered = true})),
        adam(*MakeAdamW()),
        engine(*Engine::Create(config, std::move(specs), adam.get(), comms[0].get(),
                               devices.get(), 0)) {}
  std::unique_ptr<DeviceSystem> devices;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::unique_ptr<Optimizer> adam;
  std::unique_ptr<Engine> engine;
};

// Stage 3, one rank: four modules of one equal-sized parameter each, so a
// released module's block is the next gather's. A consumer stream reads each
// module 30 ms after its Fetch; Release(module, consumer) must keep the
// block until then. Returns what the consumer read, per module.
std::vector<std::vector<float>> ReadOnConsumerStream(int drop_engine_wait) {
  constexpr size_t kNumel = 256;
  EngineConfig config;
  config.stage = 3;
  config.persistence_threshold = 0;
  config.prefetch_elements = 0;
  std::vector<ParamSpec> specs;
  for (int m = 0; m < 4; ++m) specs.push_back({"p" + std::to_string(m), kNumel, m});
  OneRank rank(5, config, specs);
  DeviceSystem* devices = rank.devices.get();
  Engine* engine = rank.engine.get();
  for (int m = 0; m < 4; ++m) {
    EXPECT_TRUE(engine->SetParam(m, std::vector<float>(kNumel, m + 1.0f)).ok());
  }
  Stream* consumer = *devices->CreateStream(0);
  std::vector<std::vector<float>> seen(4, std::vector<float>(kNumel, 0.0f));
  std::optional<DroppedStreamWait> drop;
  if (drop_engine_wait > 0) drop.emplace(drop_engine_wait, engine->stream());
  for (int m = 0; m < 4; ++m) {
    EXPECT_TRUE(engine->Fetch(m, consumer).ok());
    absl::StatusOr<Engine::ParamView> view = engine->param_view(m);
    EXPECT_TRUE(view.ok()) << view.status();
    EXPECT_TRUE(consumer->Enqueue([] { absl::SleepFor(absl::Milliseconds(30)); }).ok());
    EXPECT_TRUE(consumer->Copy(seen[m].data(), view->data, kNumel * sizeof(float)).ok());
    EXPECT_TRUE(engine->Release(m, consumer).ok());
  }
  EXPECT_TRUE(consumer->Synchronize().ok());
  if (drop) {
    EXPECT_TRUE(drop->dropped());
  }
  return seen;
}

TEST(OverlappedStreamsModes, ReleaseKeepsTheBlockForTheConsumerStream) {
  const std::vector<std::vector<float>> seen = ReadOnConsumerStream(0);
  for (int m = 0; m < 4; ++m) {
    EXPECT_EQ(seen[m], std::vector<float>(seen[m].size(), m + 1.0f)) << "module " << m;
  }
  // The engine stream's waits per module: param_view's on the gather, then
  // Release's on the consumer (the 2nd), then the drop's on the gather.
  const std::vector<std::vector<float>> early = ReadOnConsumerStream(2);
  EXPECT_NE(early[0], std::vector<float>(early[0].size(), 1.0f))
      << "module 0's block outlived its release without the consumer's event";
}

// GradBuffer(id, producer): work the producer enqueues after it (the
// gradient's writes into the slot) starts only after what the engine's
// stream holds before it (the wait for the block's last reader on the
// communication stream, the last reduction, the padding fill). The engine's
// stream is held shut by a gate; the producer's work must not run until it
// opens.
TEST(OverlappedStreamsModes, GradBufferOrdersTheProducerAfterTheEngineStream) {
  EngineConfig config;
  config.stage = 2;
  OneRank rank(3, config, {{"w", 64, 0}});
  Engine* engine = rank.engine.get();
  Stream* producer = *rank.devices->CreateStream(0);
  std::atomic<bool> open{false}, passed{false}, ran_early{false}, ran{false};
  ASSERT_TRUE(engine->stream()
                  ->Enqueue([&] {
                    while (!open.load()) absl::SleepFor(absl::Milliseconds(1));
                    passed.store(true);
                  })
                  .ok());
  absl::StatusOr<void*> slot = engine->GradBuffer(0, producer);
  ASSERT_TRUE(slot.ok()) << slot.status();
  ASSERT_TRUE(producer->Enqueue([&] {
                ran_early.store(!passed.load());
                ran.store(true);
              }).ok());
  absl::SleepFor(absl::Milliseconds(50));  // ample for an unordered producer to run
  EXPECT_FALSE(ran.load()) << "the producer ran while the engine's stream was held";
  open.store(true);
  ASSERT_TRUE(producer->Synchronize().ok());
  EXPECT_TRUE(ran.load());
  EXPECT_FALSE(ran_early.load());
  ASSERT_TRUE(engine->stream()->Synchronize().ok());
}

// AwaitFetchedOnHost waits for the module's gather and for nothing else:
// it returns while the compute stream is still held shut (where a wait for
// the streams would block), and not before the gather, which a gate on the
// communication stream holds back, has run.
TEST(OverlappedStreamsModes, AwaitFetchedOnHostWaitsForTheGatherAlone) {
  constexpr size_t kNumel = 256;
  EngineConfig config;
  config.stage = 3;
  config.persistence_threshold = 0;
  config.prefetch_elements = 0;
  OneRank rank(9, config, {{"p0", kNumel, 0}, {"p1", kNumel, 1}});
  Engine* engine = rank.engine.get();
  for (int m = 0; m < 2; ++m) {
    ASSERT_TRUE(engine->SetParam(m, std::vector<float>(kNumel, m + 1.0f)).ok());
  }
  std::atomic<bool> compute_open{false}, comm_open{false}, returned{false};
  auto gate = [](std::atomic<bool>& open) {
    return [&open] {
      while (!open.load()) absl::SleepFor(absl::Milliseconds(1));
    };
  };
  ASSERT_TRUE(engine->stream()->Enqueue(gate(compute_open)).ok());
  ASSERT_TRUE(engine->comm_stream()->Enqueue(gate(comm_open)).ok());
  ASSERT_TRUE(engine->Fetch(1).ok());
  absl::Status waited;
  std::thread host([&] {
    waited = engine->AwaitFetchedOnHost(1);
    returned.store(true);
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(returned.load()) << "returned before the gather ran";
  comm_open.store(true);
  host.join();
  ASSERT_TRUE(waited.ok()) << waited;
  absl::StatusOr<Engine::ParamView> view = engine->param_view(1);
  ASSERT_TRUE(view.ok()) << view.status();
  const float* values = static_cast<const float*>(view->data);
  EXPECT_EQ(std::vector<float>(values, values + kNumel), std::vector<float>(kNumel, 2.0f));
  compute_open.store(true);
  ASSERT_TRUE(engine->Release(1).ok());
  ASSERT_TRUE(engine->stream()->Synchronize().ok());
  EXPECT_FALSE(engine->AwaitFetchedOnHost(7).ok());  // no such module
}

}  // namespace
}  // namespace zero::testing_model
