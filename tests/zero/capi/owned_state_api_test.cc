// The C ABI's owned-state calls (zero/capi/owned_state_api.cc), what the
// Python optimizer's state_dict / load_state_dict stand on: a rank's piece,
// read and written plane by plane, and the restore that makes written
// values the parameters. Bad input is a named error that changes nothing.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "zero/capi/zero_engine.h"

namespace {

constexpr char kConfig[] =
    R"({"stage": 0, "optimizer": {"type": "adamw", "groups": [{"lr": 0.01}]}})";

class OwnedStateApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(zero_devices_create(&devices_, "host:1x64MiB"), 0);
    ASSERT_EQ(zero_comm_create_local(&comm_, 1, 5, nullptr), 0);
    const zero_param_spec params[] = {{sizeof(zero_param_spec), "w", 40, 0, 0},
                                      {sizeof(zero_param_spec), "b", 8, 1, 0}};
    ASSERT_EQ(zero_engine_create(&engine_, kConfig, params, 2, comm_, devices_, 0), 0)
        << zero_engine_last_error();
  }
  void TearDown() override {
    EXPECT_EQ(zero_engine_destroy(engine_), 0);
    zero_comm_destroy(comm_);
    zero_devices_destroy(devices_);
  }
  std::vector<float> Read(int param, int plane, size_t begin, size_t count) {
    std::vector<float> out(count, -1.0f);
    EXPECT_EQ(zero_engine_owned_read(engine_, param, plane, begin, count, out.data()), 0)
        << zero_engine_last_error();
    return out;
  }
  std::string Stats() {
    std::string text(8192, '\0');
    size_t needed = 0;
    EXPECT_EQ(zero_engine_stats_json(engine_, text.data(), text.size(), &needed), 0);
    text.resize(text.find('\0'));
    return text;
  }

  zero_devices_t devices_ = nullptr;
  zero_comm_t comm_ = nullptr;
  zero_engine_t engine_ = nullptr;
};

TEST_F(OwnedStateApi, WrittenStateIsWhatTheEngineResumesFrom) {
  size_t begin = 9, count = 0;
  int planes = 0;
  ASSERT_EQ(zero_engine_owned_piece(engine_, 0, &begin, &count, &planes), 0);
  EXPECT_EQ(begin, 0u);
  EXPECT_EQ(count, 40u);
  EXPECT_EQ(planes, 3);  // masters, exp_avg, exp_avg_sq

  const std::vector<float> w(40, 0.25f);
  ASSERT_EQ(zero_engine_set_param(engine_, 0, w.data(), w.size()), 0);
  EXPECT_EQ(Read(0, 0, 0, 40), w);
  EXPECT_EQ(Read(0, 1, 0, 40), std::vector<float>(40, 0.0f));

  const std::vector<float> master(10, 2.0f), moment(40, 0.5f);
  ASSERT_EQ(zero_engine_owned_write(engine_, 0, 0, 30, 10, master.data()), 0)
      << zero_engine_last_error();
  ASSERT_EQ(zero_engine_owned_write(engine_, 0, 1, 0, 40, moment.data()), 0);
  ASSERT_EQ(zero_engine_restore(engine_, 7), 0) << zero_engine_last_error();

  EXPECT_EQ(Read(0, 1, 0, 40), moment);
  EXPECT_EQ(Read(0, 0, 28, 4), (std::vector<float>{0.25f, 0.25f, 2.0f, 2.0f}));
  void* data = nullptr;
  size_t numel = 0;
  int dtype = -1;
  ASSERT_EQ(zero_engine_param(engine_, 0, &data, &numel, &dtype), 0);
  ASSERT_EQ(zero_engine_synchronize(engine_), 0);
  const float* whole = static_cast<const float*>(data);
  EXPECT_EQ(whole[29], 0.25f);
  EXPECT_EQ(whole[30], 2.0f) << "the parameter is rebuilt from the written masters";
  EXPECT_NE(Stats().find("\"steps\":7,"), std::string::npos) << Stats();
}

TEST_F(OwnedStateApi, BadInputIsNamedAndChangesNothing) {
  const std::vector<float> moment(40, 0.5f);
  ASSERT_EQ(zero_engine_owned_write(engine_, 0, 2, 0, 40, moment.data()), 0);
  std::vector<float> buffer(40, 9.0f);
  struct Bad {
    int param, plane;
    size_t begin, count;
    const char* said;
  };
  for (const Bad& bad : {Bad{5, 0, 0, 1, "parameter 5 does not exist"},
                         Bad{0, 3, 0, 1, "plane 3 does not exist"},
                         Bad{0, 1, 30, 20, "elements [30, 50) of parameter 0 are not this rank's"},
                         Bad{1, 0, 0, 9, "it owns [0, 8)"}}) {
    EXPECT_EQ(zero_engine_owned_write(engine_, bad.param, bad.plane, bad.begin, bad.count,
                                      buffer.data()),
              ZERO_INVALID_ARGUMENT);
    EXPECT_NE(std::string(zero_engine_last_error()).find(bad.said), std::string::npos)
        << zero_engine_last_error();
    EXPECT_EQ(zero_engine_owned_read(engine_, bad.param, bad.plane, bad.begin, bad.count,
                                     buffer.data()),
              ZERO_INVALID_ARGUMENT);
  }
  EXPECT_EQ(zero_engine_owned_read(engine_, 0, 1, 0, 4, nullptr), ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_engine_owned_piece(engine_, 0, nullptr, nullptr, nullptr), 0);  // optional
  EXPECT_EQ(zero_engine_owned_piece(engine_, -1, nullptr, nullptr, nullptr),
            ZERO_INVALID_ARGUMENT);
  EXPECT_EQ(zero_engine_restore(engine_, -1), ZERO_INVALID_ARGUMENT);
  EXPECT_NE(std::string(zero_engine_last_error()).find("steps -1 < 0"), std::string::npos);
  EXPECT_EQ(buffer, std::vector<float>(40, 9.0f)) << "a refused read wrote";
  EXPECT_EQ(Read(0, 2, 0, 40), moment) << "a refused write changed the state";
}

}  // namespace
