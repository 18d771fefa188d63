// The C ABI (zero_engine.h) against the C++ engine: the same training gives
// the same bits at every stage, over the local backend and over the
// caller's collectives; parameter groups, learning rates and errors.
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/zero/capi/capi_training.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"
#include "zero/capi/collectives.h"
#include "zero/capi/zero_engine.h"

namespace zero::testing_model {
namespace {

// test_util.h's AdamW() as the C ABI's optimizer object.
constexpr char kAdamW[] = R"({"type": "adamw", "groups": [{"lr": 0.01, "weight_decay": 0.01}]})";

std::unique_ptr<Model> Transformer() { return *MakeTransformer(2, 16, 2, 8, 2); }

TrainingRun SmallRun(int stage, int world) {
  TrainingRun run;
  run.world = world;
  run.steps = 6;
  run.config.stage = stage;
  run.config.gradient_accumulation_steps = 2;
  run.config.bucket_elements = 300;  // many units: pieces cross parameters
  run.config.persistence_threshold = 0;  // stage 3 really gathers
  return run;
}

void ExpectAllOk(const std::vector<CapiResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].code, 0) << "rank " << r << ": " << results[r].error;
  }
}

// stage, ranks, over callbacks, dtype
using Case = std::tuple<int, int, bool, DType>;
class CapiMatchesEngine : public ::testing::TestWithParam<Case> {};

TEST_P(CapiMatchesEngine, BitForBit) {
  const auto& [stage, world, callbacks, dtype] = GetParam();
  std::unique_ptr<Model> model = Transformer();
  CapiRun capi{.run = SmallRun(stage, world), .optimizer = kAdamW, .over_callbacks = callbacks};
  capi.run.config.param_dtype = dtype;
  std::vector<RankResult> expected = TrainWithEngine(*model, capi.run, AdamW());
  std::vector<CapiResult> actual = TrainWithCapi(*model, capi);
  ExpectAllOk(actual);
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(expected[r].status.ok()) << expected[r].status;
    ExpectBitIdentical(expected[r].params, actual[r].params, "rank " + std::to_string(r));
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto& [stage, world, callbacks, dtype] = info.param;
  return "stage" + std::to_string(stage) + "_ranks" + std::to_string(world) +
         (callbacks ? "_callbacks_" : "_local_") + std::string(Name(dtype));
}

INSTANTIATE_TEST_SUITE_P(Stages, CapiMatchesEngine,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(2, 4),
                                            ::testing::Bool(), ::testing::Values(DType::kF32)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Bf16, CapiMatchesEngine,
                         ::testing::Combine(::testing::Values(0, 3), ::testing::Values(2),
                                            ::testing::Values(true),
                                            ::testing::Values(DType::kBF16)),
                         CaseName);

// Group 1 has lr 0: its parameters must keep their initial bits while group
// 0's train; every stage, with and without offload, must agree.
TEST(CapiGroups, EachElementStepsWithItsGroup) {
  std::unique_ptr<Model> model = Transformer();
  const std::string two_groups =
      R"({"type": "adamw", "groups": [{"lr": 0.01, "weight_decay": 0.01}, {"lr": 0.0}]})";
  std::vector<int> groups;
  for (size_t i = 0; i < model->params().size(); ++i) groups.push_back(i % 3 == 1 ? 1 : 0);
  ParamSet first;
  for (int stage : {0, 1, 2, 3}) {
    for (Offload offload : {Offload::kNone, Offload::kOptimizer}) {
      if (stage == 0 && offload != Offload::kNone) continue;
      CapiRun capi{.run = SmallRun(stage, 2), .optimizer = two_groups, .groups = groups};
      capi.run.config.offload = offload;
      std::vector<CapiResult> results = TrainWithCapi(*model, capi);
      ExpectAllOk(results);
      if (first.empty()) first = results[0].params;
      ExpectBitIdentical(first, results[1].params, "stage " + std::to_string(stage));
      ExpectBitIdentical(first, results[0].params, "stage " + std::to_string(stage));
    }
  }
  ParamSet initial = *InitialParams(*model, 1234);
  for (size_t i = 0; i < groups.size(); ++i) {
    const bool same = std::memcmp(initial[i].data(), first[i].data(), 4 * first[i].size()) == 0;
    EXPECT_EQ(same, groups[i] == 1) << model->params()[i].name;
  }
}

// Two groups with their own lr and weight decay train to the same bits
// wherever the optimizer state lives: on the device, in pinned host memory
// (the CPU step) or on NVMe, where the optimizer sees staging buffers in
// chunks that cross group borders and only StepArgs::first_element places them.
TEST(CapiGroups, EachGroupKeepsItsSettingsWhereverTheStateLives) {
  std::unique_ptr<Model> model = Transformer();
  const std::string two_groups = R"({"type": "adamw", "groups": [
      {"lr": 0.01, "weight_decay": 0.01}, {"lr": 0.03, "weight_decay": 0.2}]})";
  std::vector<int> groups;
  for (size_t i = 0; i < model->params().size(); ++i) groups.push_back(i % 3 == 1 ? 1 : 0);
  const char* tmp = std::getenv("TEST_TMPDIR");
  for (auto [stage, dtype] : {std::pair{1, DType::kF32}, std::pair{2, DType::kF32},
                              std::pair{3, DType::kF32}, std::pair{2, DType::kBF16}}) {
    const std::string name = "stage " + std::to_string(stage) + " " + std::string(Name(dtype));
    CapiRun on_device{.run = SmallRun(stage, 2), .optimizer = two_groups, .groups = groups};
    on_device.run.config.param_dtype = dtype;
    CapiRun on_host = on_device;
    on_host.run.config.offload = Offload::kOptimizer;
    CapiRun on_nvme = on_host;
    on_nvme.run.config.offload_device = OffloadDevice::kNvme;
    on_nvme.run.config.nvme_path = tmp != nullptr ? tmp : "/tmp";
    on_nvme.run.config.nvme_chunk_elements = 100;  // not a multiple of the 16-element alignment
    const std::vector<CapiResult> expected = TrainWithCapi(*model, on_device);
    ExpectAllOk(expected);
    for (const CapiRun* run : {&on_host, &on_nvme}) {
      const std::vector<CapiResult> actual = TrainWithCapi(*model, *run);
      ExpectAllOk(actual);
      const std::string where = run == &on_host ? " host" : " nvme";
      for (int r = 0; r < 2; ++r) {
        ExpectBitIdentical(expected[r].params, actual[r].params, name + where);
      }
    }
  }
}

// Two groups with one group's settings train exactly as one group does.
TEST(CapiGroups, SplittingChangesNoBit) {
  std::unique_ptr<Model> model = Transformer();
  CapiRun one{.run = SmallRun(2, 2), .optimizer = kAdamW};
  CapiRun two = one;
  two.optimizer = R"({"type": "adamw", "groups": [{"lr": 0.01, "weight_decay": 0.01},
                                                  {"lr": 0.01, "weight_decay": 0.01}]})";
  for (size_t i = 0; i < model->params().size(); ++i) two.groups.push_back(i % 2);
  std::vector<CapiResult> a = TrainWithCapi(*model, one), b = TrainWithCapi(*model, two);
  ExpectAllOk(a);
  ExpectAllOk(b);
  ExpectBitIdentical(a[0].params, b[0].params, "rank 0");
}

TEST(CapiGroups, SetLrTakesEffect) {
  std::unique_ptr<Model> model = Transformer();
  CapiRun capi{.run = SmallRun(1, 2), .optimizer = kAdamW};
  capi.before_training = [](int, zero_engine* engine) {
    EXPECT_EQ(zero_engine_set_lr(engine, 1, 0.1), ZERO_INVALID_ARGUMENT);  // no group 1
    EXPECT_NE(std::string(zero_engine_last_error()).find("no parameter group 1"),
              std::string::npos);
    EXPECT_EQ(zero_engine_set_lr(engine, 0, -1), ZERO_INVALID_ARGUMENT);
    return zero_engine_set_lr(engine, 0, 0.0);  // AdamW, lr 0: nothing moves
  };
  std::vector<CapiResult> results = TrainWithCapi(*model, capi);
  ExpectAllOk(results);
  ExpectBitIdentical(*InitialParams(*model, 1234), results[0].params, "rank 0");
}

// With offload_overlap the CPU steps each unit as its gradients arrive, with
// the lr of that moment: an lr set between backward and step cannot apply
// to this step, and would race with the worker. It is refused, by name;
// with the overlap off the same call takes effect.
TEST(CapiGroups, AnLrChangedAfterUnitsSteppedDuringBackwardIsRefused) {
  std::unique_ptr<Model> model = Transformer();
  for (bool overlap : {true, false}) {
    CapiRun capi{.run = SmallRun(2, 2), .optimizer = kAdamW};
    capi.run.config.offload = Offload::kOptimizer;
    capi.run.config.offload_overlap = overlap;
    capi.before_step = [](int, zero_engine* engine) {
      return zero_engine_set_lr(engine, 0, 0.005);
    };
    std::vector<CapiResult> results = TrainWithCapi(*model, capi);
    for (size_t r = 0; r < results.size(); ++r) {
      if (!overlap) {
        EXPECT_EQ(results[r].code, 0) << "rank " << r << ": " << results[r].error;
        continue;
      }
      EXPECT_NE(results[r].code, 0) << "rank " << r;
      EXPECT_NE(results[r].error.find("offload_overlap already steps this step's units"),
                std::string::npos)
          << results[r].error;
    }
  }
}

// Collectives that succeed, except the all-gather, which fails with a text.
zero_collectives FailingAllGather() {
  zero_collectives fns{};
  fns.size = sizeof fns;
  fns.all_gather = [](const void*, void*, size_t, int, void*, void*) {
    zero_comm_set_error("the process group is gone");
    return 5;
  };
  fns.reduce_scatter = [](const void*, void*, size_t, int, int, void*, void*) { return 0; };
  fns.all_reduce = fns.reduce_scatter;
  fns.broadcast = [](const void*, void*, size_t, int, int, void*, void*) { return 0; };
  fns.barrier = [](void*, void*) { return 0; };
  return fns;
}

// A collective callback that fails: an error with its text on that rank,
// the communicator failed for good, no crash.
TEST(CapiCallbacks, FailureIsAStatus) {
  zero_collectives fns = FailingAllGather();
  static int aborts = 0;
  fns.abort = [](const char*, void*) { ++aborts; };
  zero_comm_t comm = nullptr;
  ASSERT_EQ(zero_comm_create(&comm, 0, 2, &fns), 0);  // one rank skips the agreement
  zero_devices_t devices = nullptr;
  ASSERT_EQ(zero_devices_create(&devices, "host:1x64MiB"), 0);
  const zero_param_spec params[] = {{sizeof(zero_param_spec), "w", 40, 0, 0}};
  zero_engine_t engine = nullptr;
  const std::string config = R"({"stage": 1, "optimizer": )" + std::string(kAdamW) + "}";
  // Creating agrees on the layout with an all-gather, which fails.
  EXPECT_EQ(zero_engine_create(&engine, config.c_str(), params, 1, comm, devices, 0),
            ZERO_INTERNAL);
  EXPECT_EQ(engine, nullptr);
  const std::string error = zero_engine_last_error();
  EXPECT_NE(error.find("AllGather"), std::string::npos) << error;
  EXPECT_NE(error.find("the process group is gone"), std::string::npos) << error;
  EXPECT_EQ(aborts, 1);
  zero_comm_destroy(comm);
  zero_devices_destroy(devices);
}

// The failure stays the communicator's error (Communicator::AsyncError), as
// on every backend.
TEST(CapiCallbacks, FailureIsTheAsyncError) {
  auto comm = capi::MakeCallbackCommunicator(0, 1, FailingAllGather());
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_TRUE((*comm)->AsyncError().ok());
  float buf[4] = {};
  const absl::Status failed = (*comm)->AllGather(buf, buf, 4, DType::kF32, nullptr);
  EXPECT_TRUE(absl::IsInternal(failed)) << failed;
  EXPECT_EQ((*comm)->AsyncError(), failed);
}

TEST(CapiErrors, BadInputIsNamed) {
  zero_devices_t devices = nullptr;
  EXPECT_EQ(zero_devices_create(&devices, "host:banana"), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_devices_create(nullptr, "host:1x64MiB"), ZERO_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zero_engine_last_error()).find("devices is null"), std::string::npos);
  ASSERT_EQ(zero_devices_create(&devices, "host:1x64MiB"), 0);
  zero_comm_t comm = nullptr;
  ASSERT_EQ(zero_comm_create_local(&comm, 1, 5, nullptr), 0);
  const zero_param_spec params[] = {{sizeof(zero_param_spec), "w", 40, 0, 0}};
  zero_engine_t engine = nullptr;
  EXPECT_EQ(zero_engine_create(&engine, R"({"stage": 1, "stagee": 2, "optimizer": {}})", params,
                               1, comm, devices, 0),
            3);
  EXPECT_NE(std::string(zero_engine_last_error()).find("unknown key 'stagee'"),
            std::string::npos)
      << zero_engine_last_error();
  zero_comm_destroy(comm);
  ASSERT_EQ(zero_comm_create_local(&comm, 1, 5, nullptr), 0);  // the failed create aborted it
  const std::string config = R"({"optimizer": )" + std::string(kAdamW) + "}";
  ASSERT_EQ(zero_engine_create(&engine, config.c_str(), params, 1, comm, devices, 0), 0)
      << zero_engine_last_error();
  float grad[40] = {};
  EXPECT_EQ(zero_engine_add_grad(engine, 0, grad, 40, 8),
            ZERO_INVALID_ARGUMENT);  // 8 is f64: not ours
  EXPECT_NE(std::string(zero_engine_last_error()).find("dtype code 8"), std::string::npos);
  EXPECT_EQ(zero_engine_param(engine, 7, reinterpret_cast<void**>(&grad), nullptr, nullptr),
            ZERO_INVALID_ARGUMENT);
  char small[8];
  size_t needed = 0;
  ASSERT_EQ(zero_engine_stats_json(engine, small, sizeof small, &needed), 0);
  EXPECT_GT(needed, sizeof small);
  std::string json(needed, '\0');
  ASSERT_EQ(zero_engine_stats_json(engine, json.data(), json.size(), &needed), 0);
  EXPECT_NE(json.find("\"shard_numel\":"), std::string::npos) << json;
  EXPECT_EQ(zero_engine_destroy(engine), 0);
  EXPECT_EQ(zero_engine_destroy(nullptr), 0);
  zero_comm_destroy(comm);
  zero_devices_destroy(devices);
}

// A reduce-scatter that fails after add_grad returned (it runs on the
// communicator's thread, behind the engine's stream): the update behind it
// on the stream is called off, so no parameter changes, and the failure is
// the step's error: Step's own when the reduction had failed by the time
// Step enqueued the update, else the next wait's (Step does not wait on the
// host: issue 41), zero_engine_synchronize's in either case.
TEST(CapiCallbacks, AFailedReductionStopsTheStepBeforeAnyUpdate) {
  zero_collectives fns{};
  fns.size = sizeof fns;
  fns.all_gather = [](const void* send, void* recv, size_t n, int, void*, void*) {
    for (int r = 0; r < 2; ++r) std::memcpy(static_cast<char*>(recv) + r * n * 4, send, n * 4);
    return 0;  // both ranks hold what this one holds: they agree
  };
  fns.reduce_scatter = [](const void*, void*, size_t, int, int, void*, void*) {
    zero_comm_set_error("the process group is gone");
    return 5;
  };
  fns.all_reduce = fns.reduce_scatter;
  fns.broadcast = [](const void*, void*, size_t, int, int, void*, void*) { return 0; };
  fns.barrier = [](void*, void*) { return 0; };
  zero_comm_t comm = nullptr;
  ASSERT_EQ(zero_comm_create(&comm, 0, 2, &fns), 0);
  zero_devices_t devices = nullptr;
  ASSERT_EQ(zero_devices_create(&devices, "host:1x64MiB"), 0);
  const zero_param_spec params[] = {{sizeof(zero_param_spec), "w", 40, 0, 0}};
  const std::string config = R"({"stage": 2, "optimizer": )" + std::string(kAdamW) + "}";
  zero_engine_t engine = nullptr;
  ASSERT_EQ(zero_engine_create(&engine, config.c_str(), params, 1, comm, devices, 0), 0)
      << zero_engine_last_error();
  std::vector<float> start(40, 0.5f), grad(40, 1.0f);
  ASSERT_EQ(zero_engine_set_param(engine, 0, start.data(), 40), 0);
  ASSERT_EQ(zero_engine_add_grad(engine, 0, grad.data(), 40, ZERO_F32), 0)
      << "the reduction runs after add_grad returns";
  const int stepped = zero_engine_step(engine);
  EXPECT_TRUE(stepped == 0 || stepped == ZERO_INTERNAL) << stepped;
  if (stepped != 0) {
    const std::string error = zero_engine_last_error();
    EXPECT_NE(error.find("ReduceScatter"), std::string::npos) << error;
    EXPECT_NE(error.find("the process group is gone"), std::string::npos) << error;
  }
  // Waiting for the engine's work reports the failure (a gather that fails
  // after Step returned would otherwise leave stale parameters unseen).
  EXPECT_EQ(zero_engine_synchronize(engine), ZERO_INTERNAL);
  const std::string waited = zero_engine_last_error();
  EXPECT_NE(waited.find("ReduceScatter"), std::string::npos) << waited;
  EXPECT_NE(waited.find("the process group is gone"), std::string::npos) << waited;
  void* data = nullptr;
  size_t numel = 0;
  int dtype = 0;
  ASSERT_EQ(zero_engine_param(engine, 0, &data, &numel, &dtype), 0) << zero_engine_last_error();
  ASSERT_EQ(numel, 40u);
  EXPECT_EQ(std::memcmp(data, start.data(), 40 * sizeof(float)), 0) << "a parameter was updated";
  zero_engine_destroy(engine);
  zero_comm_destroy(comm);
  zero_devices_destroy(devices);
}

// Host devices have no native stream (a caller there orders with
// zero_engine_synchronize); bad handles are named.
TEST(CapiStreams, HostEngineHasNoNativeStream) {
  zero_devices_t devices = nullptr;
  ASSERT_EQ(zero_devices_create(&devices, "host:1x64MiB"), 0);
  zero_comm_t comm = nullptr;
  ASSERT_EQ(zero_comm_create_local(&comm, 1, 5, nullptr), 0);
  const zero_param_spec params[] = {{sizeof(zero_param_spec), "w", 40, 0, 0}};
  const std::string config = R"({"optimizer": )" + std::string(kAdamW) + "}";
  zero_engine_t engine = nullptr;
  ASSERT_EQ(zero_engine_create(&engine, config.c_str(), params, 1, comm, devices, 0), 0)
      << zero_engine_last_error();
  void* stream = &stream;
  ASSERT_EQ(zero_engine_stream(engine, &stream), 0) << zero_engine_last_error();
  EXPECT_EQ(stream, nullptr);
  float grad[40] = {1};
  ASSERT_EQ(zero_engine_add_grad(engine, 0, grad, 40, ZERO_F32), 0);
  EXPECT_EQ(zero_engine_synchronize(engine), 0) << zero_engine_last_error();
  EXPECT_EQ(zero_engine_stream(engine, nullptr), ZERO_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zero_engine_last_error()).find("stream is null"), std::string::npos);
  EXPECT_EQ(zero_engine_synchronize(nullptr), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_engine_destroy(engine), 0);
  zero_comm_destroy(comm);
  zero_devices_destroy(devices);
}

// The build info says how this very code was compiled (the test and the
// library are built in one Bazel configuration).
TEST(CapiBuild, InfoSaysWhetherTheCodeIsOptimized) {
#ifdef __OPTIMIZE__
  const std::string optimized = R"("optimized": true)";
#else
  const std::string optimized = R"("optimized": false)";
#endif
  const std::string info = zero_engine_build_info();
  EXPECT_NE(info.find(optimized), std::string::npos) << info;
  EXPECT_EQ(info.front(), '{');
  EXPECT_EQ(info.back(), '}');
  EXPECT_EQ(zero_engine_build_info(), zero_engine_build_info());  // static text
}

}  // namespace
}  // namespace zero::testing_model
