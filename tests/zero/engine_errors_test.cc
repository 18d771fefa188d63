// Bad input to the engine: a clear error on every rank, never a hang.
#include <barrier>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/limiting_adaptor.h"
#include "optimizers/adam.h"
#include "zero/comm/local_communicator.h"
#include "zero/engine.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

std::vector<ParamSpec> Specs() { return {{"a", 100, 0}, {"b", 50, 1}, {"c", 30, 1}}; }

using RankFn = std::function<absl::Status(int rank, Communicator* comm, DeviceSystem* devices)>;

// Runs `fn` on `world` ranks (threads) and returns each rank's status. The
// group's timeout is long: a pass means errors, not the clock, ended it.
std::vector<absl::Status> RunRanks(int world, const RankFn& fn) {
  auto devices = *DeviceSystem::Create({DeviceSpec::Kind::kHost, world, size_t{64} << 20});
  LocalGroup::Options options;
  options.timeout = absl::Seconds(60);
  auto comms = *LocalGroup::Create(world, options);
  std::vector<absl::Status> status(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] { status[r] = fn(r, comms[r].get(), devices.get()); });
  }
  for (auto& t : threads) t.join();
  return status;
}

EngineConfig Stage2() {
  EngineConfig config;
  config.stage = 2;
  config.bucket_elements = 60;
  return config;
}

class EngineErrors : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<Engine>> Create(Communicator* comm, DeviceSystem* devices,
                                                 int rank, std::vector<ParamSpec> specs = Specs(),
                                                 EngineConfig config = Stage2()) {
    return Engine::Create(config, std::move(specs), adam_.get(), comm, devices, rank);
  }
  // All gradients of one micro-batch, in reverse order.
  static absl::Status AllGrads(Engine& engine) {
    std::vector<float> g(100, 1.0f);
    for (int id = 2; id >= 0; --id) {
      absl::Status s = engine.AddGrad(id, std::span<const float>(g.data(), Specs()[id].numel));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::unique_ptr<Optimizer> adam_ = *MakeAdamW();
};

TEST_F(EngineErrors, ParameterRegisteredTwice) {
  auto status = RunRanks(4, [&](int r, Communicator* comm, DeviceSystem* d) {
    return Create(comm, d, r, {{"w", 10, 0}, {"w", 10, 0}}).status();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("'w' registered twice"));
  }
}

TEST_F(EngineErrors, RanksDisagreeOnTheLayout) {
  auto status = RunRanks(4, [&](int r, Communicator* comm, DeviceSystem* d) {
    std::vector<ParamSpec> specs = Specs();
    if (r == 2) specs[1].numel = 51;
    return Create(comm, d, r, specs).status();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("rank(s) 2 differ"));
  }
}

// Settings that change the order of collectives or what a replica computes:
// each differing on one rank is refused on every rank at Create (a loss
// scale of its own made replicas diverge silently; stage 3's prefetch and
// live limits paired unlike gathers before anything noticed).
TEST_F(EngineErrors, RanksDisagreeOnSettingsThatChangeTheCollectivesOrTheUpdate) {
  const std::vector<std::function<void(EngineConfig&)>> changes = {
      [](EngineConfig& c) { c.loss_scaler.initial_scale = 1024; },
      [](EngineConfig& c) { c.max_grad_norm = 1.0; },
      [](EngineConfig& c) { c.prefetch_elements = 64; },
      [](EngineConfig& c) { c.max_live_elements = 64; },
      [](EngineConfig& c) { c.max_reuse_distance = 3; },
      [](EngineConfig& c) { c.reduce_chunk_elements = 128; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) {
      EngineConfig config;
      config.stage = 3;
      config.param_dtype = DType::kF16;
      if (r == 1) changes[i](config);
      return Create(comm, d, r, Specs(), config).status();
    });
    for (const absl::Status& s : status) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << "change " << i << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("rank(s) 1 differ")) << "change " << i;
    }
  }
}

TEST_F(EngineErrors, GradientOfTheWrongSizeOrDtype) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    auto status = RunRanks(4, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
      ASSIGN_OR_RETURN(auto engine, Create(comm, d, r));
      std::vector<float> g(100, 1.0f);
      if (r == 1) return engine->AddGrad(2, g.data(), dtype == DType::kF32 ? 29 : 30, dtype);
      RETURN_IF_ERROR(AllGrads(*engine));
      return engine->Step();
    });
    EXPECT_EQ(status[1].code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status[1].message()), HasSubstr("gradient of 'c'"));
    for (int r : {0, 2, 3}) EXPECT_FALSE(status[r].ok()) << "rank " << r << " went on";
  }
}

TEST_F(EngineErrors, StepBeforeEveryGradientArrived) {
  auto status = RunRanks(4, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r));
    std::vector<float> g(100, 1.0f);
    if (r == 3) {
      RETURN_IF_ERROR(engine->AddGrad(2, std::span<const float>(g.data(), 30)));
      return engine->Step();
    }
    RETURN_IF_ERROR(AllGrads(*engine));
    return engine->Step();
  });
  EXPECT_EQ(status[3].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status[3].message()), HasSubstr("Step before every gradient arrived"));
  EXPECT_THAT(std::string(status[3].message()), HasSubstr("'a'"));
  for (int r : {0, 1, 2}) EXPECT_FALSE(status[r].ok()) << "rank " << r << " went on";
}

TEST_F(EngineErrors, GradientTwiceInOneMicroBatchAndUnknownParameter) {
  auto status = RunRanks(1, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r));
    std::vector<float> g(100, 1.0f);
    EXPECT_EQ(engine->AddGrad(7, g).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(engine->param(-1).status().code(), absl::StatusCode::kInvalidArgument);
    return absl::OkStatus();
  });
  EXPECT_TRUE(status[0].ok());
  status = RunRanks(1, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r));
    std::vector<float> g(100, 1.0f);
    RETURN_IF_ERROR(engine->AddGrad(0, std::span<const float>(g.data(), 100)));
    return engine->AddGrad(0, std::span<const float>(g.data(), 100));
  });
  EXPECT_EQ(status[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status[0].message()), HasSubstr("handed over twice"));
}

// Rank 1 skips a Step: its next reduce-scatter meets the others' all-gather.
TEST_F(EngineErrors, RanksDisagreeOnTheSequenceOfCollectives) {
  auto status = RunRanks(4, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r));
    RETURN_IF_ERROR(AllGrads(*engine));
    if (r == 1) {
      RETURN_IF_ERROR(engine->ZeroGrad());
      return AllGrads(*engine);
    }
    return engine->Step();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("differs"));
  }
}

TEST_F(EngineErrors, StageThreeFetchAndReleaseMisuse) {
  EngineConfig config = Stage2();
  config.stage = 3;
  config.persistence_threshold = 0;
  // The misuse fails the group (so a peer never waits for this rank); only
  // once both ranks are built, or a rank still inside Create's collectives
  // would get the other's error instead of its own (seen under ASan).
  std::barrier created(2);
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    absl::StatusOr<std::unique_ptr<Engine>> engine = Create(comm, d, r, Specs(), config);
    created.arrive_and_wait();
    RETURN_IF_ERROR(engine.status());
    EXPECT_EQ((*engine)->param(0).status().code(), absl::StatusCode::kFailedPrecondition)
        << "not fetched";
    return r == 0 ? (*engine)->Fetch(9) : (*engine)->Release(1);
  });
  EXPECT_EQ(status[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status[0].message()), HasSubstr("module 9"));
  EXPECT_EQ(status[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status[1].message()), HasSubstr("not fetched"));
}

// Restoring in steps (checkpoint::Load's way): a unit out of order, a unit
// outside BeginRestore .. EndRestore, and EndRestore before every unit are
// each an error that fails the group, so no peer waits in a unit's gathers.
TEST_F(EngineErrors, RestoreInStepsOutOfOrder) {
  std::barrier ready(3);
  auto status = RunRanks(3, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    absl::StatusOr<std::unique_ptr<Engine>> engine = Create(comm, d, r);
    // Every rank built and the restoring ones begun before any misuse fails the group.
    const ResumePoint point{.steps = 1, .loss_scaler = std::nullopt};
    absl::Status begun = engine.ok() && r > 0 ? (*engine)->owned_state().BeginRestore(point) : engine.status();
    ready.arrive_and_wait();
    RETURN_IF_ERROR(begun);
    EXPECT_GE((*engine)->layout().units().size(), 2u) << "what makes the test mean something";
    if (r == 0) return (*engine)->owned_state().RestoreUnit(0);
    return r == 1 ? (*engine)->owned_state().RestoreUnit(1) : (*engine)->owned_state().EndRestore();
  });
  EXPECT_EQ(status[0].code(), absl::StatusCode::kFailedPrecondition) << status[0];
  EXPECT_THAT(std::string(status[0].message()), HasSubstr("outside BeginRestore"));
  EXPECT_EQ(status[1].code(), absl::StatusCode::kFailedPrecondition) << status[1];
  EXPECT_THAT(std::string(status[1].message()), HasSubstr("unit 0 is next"));
  EXPECT_EQ(status[2].code(), absl::StatusCode::kFailedPrecondition) << status[2];
  EXPECT_THAT(std::string(status[2].message()), HasSubstr("after 0 of"));
}

// After every unit is restored only EndRestore may come; and nothing but
// the restore may run in between (the peers are in its gathers). A refused
// BeginRestore changes nothing: the engine is not left restoring.
TEST_F(EngineErrors, RestoreInStepsRefusesEverythingElse) {
  auto status = RunRanks(3, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r));
    const absl::Status refused = engine->owned_state().BeginRestore({.steps = -1, .loss_scaler = std::nullopt});
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_EQ(engine->owned_state().CheckResumePoint({.steps = 1, .loss_scaler = std::nullopt}),
              absl::OkStatus());
    RETURN_IF_ERROR(engine->owned_state().BeginRestore({.steps = 1, .loss_scaler = std::nullopt}));
    const int units = static_cast<int>(engine->layout().units().size());
    for (int u = 0; u < units; ++u) RETURN_IF_ERROR(engine->owned_state().RestoreUnit(u));
    EXPECT_EQ(units, 3);
    if (r == 0) return engine->owned_state().RestoreUnit(units);
    if (r == 1) return engine->Step();
    return engine->owned_state().BeginRestore({.steps = 1, .loss_scaler = std::nullopt});
  });
  EXPECT_EQ(status[0].code(), absl::StatusCode::kFailedPrecondition) << status[0];
  EXPECT_THAT(std::string(status[0].message()), HasSubstr("RestoreUnit(3) after all 3 units were restored"));
  EXPECT_EQ(status[1].code(), absl::StatusCode::kFailedPrecondition) << status[1];
  EXPECT_THAT(std::string(status[1].message()),
              HasSubstr("rank 1: Step between BeginRestore and EndRestore (3 of 3"));
  EXPECT_EQ(status[2].code(), absl::StatusCode::kFailedPrecondition) << status[2];
  EXPECT_THAT(std::string(status[2].message()), HasSubstr("BeginRestore while restoring"));
}

// A restore drops and renews the gathered units: refused while a module is
// fetched (its kernels may still read them), changing nothing.
TEST_F(EngineErrors, RestoreWhileAModuleIsFetched) {
  EngineConfig config = Stage2();
  config.stage = 3;
  config.persistence_threshold = 0;
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r, Specs(), config));
    RETURN_IF_ERROR(engine->Fetch(0));
    const size_t live = engine->live_gathered_elements();
    const absl::Status restored = engine->owned_state().Restore(engine->owned_state().resume_point());
    EXPECT_EQ(restored.code(), absl::StatusCode::kFailedPrecondition) << restored;
    EXPECT_THAT(std::string(restored.message()),
                HasSubstr("a restore while module 0 is still fetched"));
    EXPECT_EQ(engine->live_gathered_elements(), live);
    RETURN_IF_ERROR(engine->param(0).status());
    return engine->Release(0);
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
}

// A rank whose Create fails after the ranks met (here: its device memory)
// fails the group, so a peer that was created fails at once, not at the
// timeout (60 s here) or never (NCCL).
TEST_F(EngineErrors, ACreateThatFailsOnOneRankFailsItsPeersAtOnce) {
  const absl::Time start = absl::Now();
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    LimitingAdaptor tiny(&d->pool(r), 2048);
    EngineMemory memory;
    if (r == 1) memory.device = &tiny;
    ASSIGN_OR_RETURN(auto engine,
                     Engine::Create(Stage2(), Specs(), adam_.get(), comm, d, r, memory));
    RETURN_IF_ERROR(AllGrads(*engine));
    return engine->Step();
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(status[1].code(), absl::StatusCode::kResourceExhausted) << status[1];
  EXPECT_FALSE(status[0].ok());
}

// In-place hand-over: the slot GradBuffer gives, written (here, or by a
// copy on another stream that GradBuffer orders after the slot's readiness
// and GradWritten's event orders before the reduction), then GradWritten,
// trains the same bits as AddGrad (stage 2, two micro-batches: the slot
// moves between them). GradWritten without taking the slot in this
// micro-batch (a pointer kept from the last one is freed by now) is refused.
TEST_F(EngineErrors, GradientsWrittenInPlaceEqualCopiedOnesAndNeedTheirSlot) {
  EngineConfig config = Stage2();
  config.gradient_accumulation_steps = 2;
  enum Mode { kCopied, kInPlace, kOnAProducerStream };
  auto train = [&](Mode mode) {
    std::vector<std::vector<float>> params(2);
    auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
      ASSIGN_OR_RETURN(auto engine, Create(comm, d, r, Specs(), config));
      ASSIGN_OR_RETURN(Stream * producer, d->CreateStream(r));
      for (int step = 0; step < 2; ++step) {
        for (int micro = 0; micro < 2; ++micro) {
          std::vector<std::vector<float>> grads(3);  // read by the producer's copies
          for (int id = 2; id >= 0; --id) {
            std::vector<float>& g = grads[id];
            g.resize(Specs()[id].numel);
            for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * (i + 1) * (r + micro + 1);
            if (mode == kCopied) {
              RETURN_IF_ERROR(engine->AddGrad(id, g));
            } else if (mode == kInPlace) {
              ASSIGN_OR_RETURN(void* slot, engine->GradBuffer(id));
              std::memcpy(slot, g.data(), g.size() * sizeof(float));
              RETURN_IF_ERROR(engine->GradWritten(id));
            } else {
              ASSIGN_OR_RETURN(void* slot, engine->GradBuffer(id, producer));
              RETURN_IF_ERROR(producer->Copy(slot, g.data(), g.size() * sizeof(float)));
              ASSIGN_OR_RETURN(std::shared_ptr<Event> written, producer->Record());
              RETURN_IF_ERROR(engine->GradWritten(id, written));
            }
          }
          RETURN_IF_ERROR(producer->Synchronize());
        }
        RETURN_IF_ERROR(engine->Step());
      }
      for (int id = 0; id < 3; ++id) {
        ASSIGN_OR_RETURN(std::span<float> p, engine->param(id));
        params[r].insert(params[r].end(), p.begin(), p.end());
      }
      return absl::OkStatus();
    });
    for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
    return params[0];
  };
  const std::vector<float> copied = train(kCopied);
  ASSERT_EQ(copied.size(), 180u);
  EXPECT_EQ(copied, train(kInPlace));
  EXPECT_EQ(copied, train(kOnAProducerStream));
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Create(comm, d, r, Specs(), config));
    return engine->GradWritten(2);
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("GradWritten for 'c' without GradBuffer"));
  }
}

// Modules of equal size fetched in another order on one rank: every
// collective matches, so only the recorded order can tell.
TEST_F(EngineErrors, StageThreeFetchOrderDiffersBetweenRanks) {
  EngineConfig config;
  config.stage = 3;
  config.persistence_threshold = 0;
  config.bucket_elements = 64;
  const std::vector<ParamSpec> specs = {{"x", 64, 0}, {"y", 64, 1}};
  auto status = RunRanks(4, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(auto engine, Engine::Create(config, specs, adam_.get(), comm, d, r));
    std::vector<float> g(64, 1.0f);
    const int first = r == 2 ? 1 : 0;
    for (int m : {first, 1 - first}) {
      RETURN_IF_ERROR(engine->Fetch(m));
      RETURN_IF_ERROR(engine->Release(m));
    }
    for (int m : {1, 0}) {
      RETURN_IF_ERROR(engine->Fetch(m));
      RETURN_IF_ERROR(engine->AddGrad(m, g));
      RETURN_IF_ERROR(engine->Release(m));
    }
    return engine->Step();
  });
  for (const absl::Status& s : status) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("order of module fetches"));
  }
}

TEST_F(EngineErrors, BadConfig) {
  EngineConfig no_micro_batches, negative_clip, no_stage_four, no_chunk, bad_dtype, bad_scaler;
  no_micro_batches.gradient_accumulation_steps = 0;
  negative_clip.max_grad_norm = -1;
  no_stage_four.stage = 4;
  no_chunk.reduce_chunk_elements = 0;
  bad_dtype.param_dtype = static_cast<DType>(7);
  bad_scaler.param_dtype = DType::kF16;
  bad_scaler.loss_scaler.backoff_factor = 2.0;  // would grow on overflow
  for (const EngineConfig& config :
       {no_micro_batches, negative_clip, no_stage_four, no_chunk, bad_dtype, bad_scaler}) {
    auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) {
      return Engine::Create(config, Specs(), adam_.get(), comm, d, r).status();
    });
    for (const absl::Status& s : status) EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  }
}

// A bf16 model is read through param_view; param() says so.
TEST_F(EngineErrors, Fp32AccessToBf16Parameters) {
  EngineConfig config = Stage2();
  config.param_dtype = DType::kBF16;
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Create(comm, d, r, Specs(), config));
    absl::StatusOr<std::span<float>> p = engine->param(0);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr("use param_view"));
    ASSIGN_OR_RETURN(Engine::ParamView view, engine->param_view(0));
    EXPECT_EQ(view.dtype, DType::kBF16);
    EXPECT_EQ(view.numel, 100u);
    return absl::OkStatus();
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
}

// With offload_overlap the step is applied during the last micro-batch's
// backward, so dropping the gradients afterwards would be a lie: refused,
// and the step then completes normally. Until Step the worker may still be
// stepping the owned state: reading it (a checkpoint's snapshot), writing
// it (SetParam) or restoring it is refused too.
TEST_F(EngineErrors, ZeroGradAfterTheStepWasAppliedEarly) {
  EngineConfig config = Stage2();
  config.offload = Offload::kOptimizer;
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Create(comm, d, r, Specs(), config));
    RETURN_IF_ERROR(AllGrads(*engine));
    const absl::Status zero = engine->ZeroGrad();
    EXPECT_EQ(zero.code(), absl::StatusCode::kFailedPrecondition) << zero;
    EXPECT_THAT(std::string(zero.message()), HasSubstr("call Step"));
    const std::vector<float> values(100, 0.5f);
    const absl::Status reads = engine->owned_state().Stream(
        0, OwnedStateAccess::Access::kRead, [](size_t, size_t, std::span<float* const>) {
          ADD_FAILURE() << "read the owned state while the worker steps it";
          return absl::OkStatus();
        });
    for (const absl::Status& s : {engine->SetParam(0, values), reads,
                                  engine->owned_state().BeginRestore({.steps = 0, .loss_scaler = {}})}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("call Step"));
    }
    const absl::Status snapshot = engine->OwnedStateSettled("a checkpoint");
    EXPECT_EQ(snapshot.code(), absl::StatusCode::kFailedPrecondition) << snapshot;
    EXPECT_THAT(std::string(snapshot.message()), HasSubstr("a checkpoint between backward"));
    RETURN_IF_ERROR(engine->Step());
    EXPECT_EQ(engine->stats().steps, 1);
    EXPECT_TRUE(engine->OwnedStateSettled("a checkpoint").ok());
    return engine->ZeroGrad();
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
}

// Restore checks what it is given before touching anything.
TEST_F(EngineErrors, RestoreToANegativeStepOrAForeignScale) {
  EngineConfig config = Stage2();
  config.param_dtype = DType::kF16;
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Create(comm, d, r, Specs(), config));
    const absl::Status negative = engine->owned_state().Restore({.steps = -1, .loss_scaler = std::nullopt});
    EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument) << negative;
    ResumePoint bad_scale = engine->owned_state().resume_point();
    bad_scale.loss_scaler->scale = -4;
    const absl::Status scale = engine->owned_state().Restore(bad_scale);
    EXPECT_EQ(scale.code(), absl::StatusCode::kInvalidArgument) << scale;
    EXPECT_EQ(engine->loss_scale(), 65536.0);
    return absl::OkStatus();
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
}

// The one-call Restore refused on one rank only: every rank fails at once
// (the others went on into RestoreUnit's gathers and waited for the
// timeout); nothing restored anywhere.
TEST_F(EngineErrors, ARestoreRefusedOnOneRankFailsEveryRankAtOnce) {
  const absl::Time start = absl::Now();
  auto status = RunRanks(2, [&](int r, Communicator* comm, DeviceSystem* d) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Create(comm, d, r));
    const absl::Status restored = engine->owned_state().Restore({.steps = r == 0 ? -1 : 5, .loss_scaler = {}});
    EXPECT_EQ(engine->owned_state().resume_point().steps, 0) << "rank " << r;
    return restored;
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "a rank waited for the timeout";
  EXPECT_EQ(status[0].code(), absl::StatusCode::kInvalidArgument) << status[0];
  EXPECT_EQ(status[1].code(), absl::StatusCode::kFailedPrecondition) << status[1];
  EXPECT_THAT(std::string(status[1].message()), HasSubstr("whether the restore can begin"));
}

}  // namespace
}  // namespace zero
