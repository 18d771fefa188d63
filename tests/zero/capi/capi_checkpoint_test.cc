// The C ABI's checkpoint functions: saved by 2 ranks (threads over the local
// backend) at stage 2, loaded by 1 rank at stage 3 with the same values and
// step count, consolidated offline; the asynchronous save writes the state
// at its start; bad input is an error that names it and changes nothing.
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "zero/capi/zero_engine.h"

namespace {

constexpr char kParams[] = "w";
constexpr size_t kNumel = 40;

std::string Config(int stage) {
  return "{\"stage\": " + std::to_string(stage) +
         R"(, "optimizer": {"type": "adamw", "groups": [{"lr": 0.01}]}})";
}

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// One rank's engine over `comm`, with w = 0.5, 1.5, ... and one step of
// gradient g_i = i * (rank + 1) taken when `steps` is 1.
struct Rank {
  zero_devices_t devices = nullptr;
  zero_engine_t engine = nullptr;
  int Create(zero_comm_t comm, int stage, int steps, int rank) {
    const zero_param_spec spec[] = {{sizeof(zero_param_spec), kParams, kNumel, 0, 0}};
    if (int rc = zero_devices_create(&devices, "host:1x64MiB"); rc != 0) return rc;
    const std::string config = Config(stage);
    if (int rc = zero_engine_create(&engine, config.c_str(), spec, 1, comm, devices, 0); rc != 0) {
      return rc;
    }
    std::vector<float> values(kNumel), grad(kNumel);
    for (size_t i = 0; i < kNumel; ++i) values[i] = 0.5f + i, grad[i] = float(i) * (rank + 1);
    if (int rc = zero_engine_set_param(engine, 0, values.data(), kNumel); rc != 0) return rc;
    for (int s = 0; s < steps; ++s) {
      if (int rc = zero_engine_fetch(engine, 0); rc != 0) return rc;
      if (int rc = zero_engine_add_grad(engine, 0, grad.data(), kNumel, ZERO_F32); rc != 0) {
        return rc;
      }
      if (int rc = zero_engine_release(engine, 0); rc != 0) return rc;
      if (int rc = zero_engine_step(engine); rc != 0) return rc;
    }
    return 0;
  }
  std::vector<float> Params() {
    void* data = nullptr;
    size_t numel = 0;
    int dtype = 0;
    if (zero_engine_fetch(engine, 0) != 0) return {};
    if (zero_engine_param(engine, 0, &data, &numel, &dtype) != 0) return {};
    std::vector<float> out(static_cast<float*>(data), static_cast<float*>(data) + numel);
    zero_engine_release(engine, 0);
    return out;
  }
  ~Rank() {
    zero_engine_destroy(engine);
    zero_devices_destroy(devices);
  }
};

TEST(CapiCheckpoint, TwoRanksSaveOneLoadsAtAnotherStage) {
  const std::string root = TempDir("capi-ckpt");
  zero_comm_t comms[2] = {};
  ASSERT_EQ(zero_comm_create_local(comms, 2, 30, nullptr), 0);
  Rank saver[2];
  std::string written[2];
  std::vector<float> saved;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(saver[r].Create(comms[r], 2, 1, r), 0) << zero_engine_last_error();
      char path[4096];
      size_t needed = 0;
      ASSERT_EQ(zero_engine_save(saver[r].engine, root.c_str(), path, sizeof path, &needed), 0)
          << zero_engine_last_error();
      EXPECT_EQ(needed, std::string(path).size() + 1);
      written[r] = path;
      if (r == 0) saved = saver[r].Params();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(written[0], written[1]);
  EXPECT_NE(written[0].find("step-1"), std::string::npos) << written[0];
  ASSERT_EQ(saved.size(), kNumel);
  EXPECT_NE(saved[3], 3.5f) << "the step changed the parameters";

  zero_comm_t one = nullptr;
  ASSERT_EQ(zero_comm_create_local(&one, 1, 30, nullptr), 0);
  Rank loaded;
  ASSERT_EQ(loaded.Create(one, 3, 0, 0), 0) << zero_engine_last_error();
  const std::vector<float> before = loaded.Params();
  EXPECT_EQ(zero_engine_load(loaded.engine, (root + "/missing").c_str()), 5);  // NOT_FOUND
  EXPECT_NE(std::string(zero_engine_last_error()).find("missing"), std::string::npos)
      << zero_engine_last_error();
  EXPECT_EQ(loaded.Params(), before) << "a failed load changes nothing";
  ASSERT_EQ(zero_engine_load(loaded.engine, root.c_str()), 0) << zero_engine_last_error();
  EXPECT_EQ(loaded.Params(), saved);
  char stats[4096];
  size_t needed = 0;
  ASSERT_EQ(zero_engine_stats_json(loaded.engine, stats, sizeof stats, &needed), 0);
  EXPECT_NE(std::string(stats).find("\"steps\":1,"), std::string::npos) << stats;

  const std::string out = root + "/w.safetensors";
  ASSERT_EQ(zero_checkpoint_consolidate(root.c_str(), out.c_str()), 0) << zero_engine_last_error();
  // 8-byte length, header, then the 40 floats.
  EXPECT_GT(std::filesystem::file_size(out), 8 + kNumel * 4);
  EXPECT_NE(zero_checkpoint_consolidate((root + "/missing").c_str(), out.c_str()), 0);
  EXPECT_EQ(zero_engine_save(loaded.engine, nullptr, nullptr, 0, nullptr), ZERO_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zero_engine_last_error()).find("root is null"), std::string::npos);
  EXPECT_EQ(zero_engine_load(nullptr, root.c_str()), ZERO_INVALID_ARGUMENT);
  for (zero_comm_t c : comms) zero_comm_destroy(c);
  zero_comm_destroy(one);
}

// The asynchronous pair: a step taken between start and wait does not
// change what is written; wait with nothing pending is refused.
TEST(CapiCheckpoint, AStepBetweenStartAndWaitIsNotInTheCheckpoint) {
  const std::string root = TempDir("capi-async");
  zero_comm_t comms[2] = {};
  ASSERT_EQ(zero_comm_create_local(comms, 2, 30, nullptr), 0);
  Rank saver[2];
  std::string written[2];
  std::vector<float> at_start, after;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(saver[r].Create(comms[r], 2, 1, r), 0) << zero_engine_last_error();
      if (r == 0) at_start = saver[r].Params();
      ASSERT_EQ(zero_engine_save_start(saver[r].engine, root.c_str()), 0)
          << zero_engine_last_error();
      std::vector<float> grad(kNumel, 1.0f);
      ASSERT_EQ(zero_engine_fetch(saver[r].engine, 0), 0);
      ASSERT_EQ(zero_engine_add_grad(saver[r].engine, 0, grad.data(), kNumel, ZERO_F32), 0);
      ASSERT_EQ(zero_engine_release(saver[r].engine, 0), 0);
      ASSERT_EQ(zero_engine_step(saver[r].engine), 0) << zero_engine_last_error();
      char path[4096];
      size_t needed = 0;
      ASSERT_EQ(zero_engine_save_wait(saver[r].engine, path, sizeof path, &needed), 0)
          << zero_engine_last_error();
      written[r] = path;
      EXPECT_EQ(zero_engine_save_wait(saver[r].engine, path, sizeof path, &needed),
                ZERO_FAILED_PRECONDITION);
      EXPECT_NE(std::string(zero_engine_last_error()).find("no checkpoint save is pending"),
                std::string::npos);
      if (r == 0) after = saver[r].Params();
      // A blocking save while one is pending publishes that one first, so
      // `latest` ends at the newer.
      ASSERT_EQ(zero_engine_save_start(saver[r].engine, root.c_str()), 0);
      ASSERT_EQ(zero_engine_save(saver[r].engine, root.c_str(), path, sizeof path, &needed), 0)
          << zero_engine_last_error();
      EXPECT_NE(std::string(path).find("step-2.1"), std::string::npos) << "beside step-2: " << path;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(std::filesystem::exists(root + "/step-2/manifest"))
      << "the pending save at step 2 was published";
  EXPECT_EQ(written[0], written[1]);
  EXPECT_NE(written[0].find("step-1"), std::string::npos) << written[0];
  ASSERT_EQ(at_start.size(), kNumel);
  EXPECT_NE(after, at_start) << "the step between start and wait changed the parameters";

  zero_comm_t one = nullptr;
  ASSERT_EQ(zero_comm_create_local(&one, 1, 30, nullptr), 0);
  Rank loaded;
  ASSERT_EQ(loaded.Create(one, 2, 0, 0), 0) << zero_engine_last_error();
  ASSERT_EQ(zero_engine_load(loaded.engine, written[0].c_str()), 0) << zero_engine_last_error();
  EXPECT_EQ(loaded.Params(), at_start);
  EXPECT_EQ(zero_engine_save_start(loaded.engine, nullptr), ZERO_INVALID_ARGUMENT);
  for (zero_comm_t c : comms) zero_comm_destroy(c);
  zero_comm_destroy(one);
}

// zero_engine_snapshot_start: published while the ranks step on, with no
// wait; zero_engine_save_wait then agrees and returns the folder, and a
// plain save_start afterwards publishes beside it.
TEST(CapiCheckpoint, ASnapshotIsPublishedWithoutWait) {
  const std::string root = TempDir("capi-snapshot");
  zero_comm_t comms[2] = {};
  ASSERT_EQ(zero_comm_create_local(comms, 2, 30, nullptr), 0);
  Rank rank[2];
  std::string written[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(rank[r].Create(comms[r], 2, 1, r), 0) << zero_engine_last_error();
      ASSERT_EQ(zero_engine_snapshot_start(rank[r].engine, root.c_str()), 0)
          << zero_engine_last_error();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!std::filesystem::exists(root + "/latest") &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      char path[4096];
      size_t needed = 0;
      ASSERT_EQ(zero_engine_save_wait(rank[r].engine, path, sizeof path, &needed), 0)
          << zero_engine_last_error();
      written[r] = path;
      EXPECT_EQ(zero_engine_snapshot_start(rank[r].engine, nullptr), ZERO_INVALID_ARGUMENT);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(std::filesystem::exists(written[0] + "/manifest")) << written[0];
  EXPECT_EQ(written[0], root + "/step-1");  // Rank::Create took one step
  EXPECT_EQ(written[1], written[0]);
  for (zero_comm_t c : comms) zero_comm_destroy(c);
}

}  // namespace
