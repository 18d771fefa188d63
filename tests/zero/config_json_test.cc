// The engine's config JSON (zero/config_json.h, the C ABI's config):
// defaults, every key read, and errors that name the key and where it is.
#include "zero/config_json.h"

#include <string>

#include "gtest/gtest.h"

namespace zero {
namespace {

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<EngineSetup> setup = ParseEngineSetup(json);
  EXPECT_FALSE(setup.ok()) << json;
  return setup.ok() ? "" : std::string(setup.status().message());
}

TEST(EngineJson, DefaultsAreTorchsAndTheEngines) {
  absl::StatusOr<EngineSetup> setup =
      ParseEngineSetup(R"({"optimizer": {"type": "adamw", "groups": [{}]}})");
  ASSERT_TRUE(setup.ok()) << setup.status();
  EXPECT_EQ(setup->config.stage, 0);
  EXPECT_EQ(setup->config.bucket_elements, EngineConfig{}.bucket_elements);
  ASSERT_EQ(setup->optimizer.size(), 1);
  EXPECT_EQ(setup->optimizer.adam[0].weight_decay, 0.01);  // AdamW's, not Adam's 0
  EXPECT_TRUE(setup->optimizer.adam[0].decoupled_weight_decay);
}

TEST(EngineJson, ReadsEveryKey) {
  absl::StatusOr<EngineSetup> setup = ParseEngineSetup(R"({
    "stage": 3, "gradient_accumulation_steps": 4, "bucket_elements": 1000,
    "max_grad_norm": 1.5, "param_dtype": "f16", "reduce_chunk_elements": 64,
    "loss_scaler": {"initial_scale": 1024, "growth_factor": 2, "backoff_factor": 0.5,
                    "growth_interval": 10, "hysteresis": 3, "min_scale": 1,
                    "consecutive_hysteresis": true},
    "offload": "parameters", "host_capacity": 1048576, "offload_overlap": false,
    "offload_device": "nvme", "nvme_path": "/local/nvme", "nvme_chunk_elements": 4096,
    "prefetch_elements": 7, "max_live_elements": 8, "max_reuse_distance": 9,
    "persistence_threshold": 10,
    "optimizer": {"type": "sgd", "groups": [{"lr": 0.1, "momentum": 0.9, "nesterov": true},
                                            {"lr": 0.2, "dampening": 0.1, "momentum": 0.5,
                                             "weight_decay": 0.3, "maximize": true}]}})");
  ASSERT_TRUE(setup.ok()) << setup.status();
  const EngineConfig& c = setup->config;
  EXPECT_EQ(c.stage, 3);
  EXPECT_EQ(c.gradient_accumulation_steps, 4);
  EXPECT_EQ(c.bucket_elements, 1000u);
  EXPECT_EQ(c.max_grad_norm, 1.5);
  EXPECT_EQ(c.param_dtype, DType::kF16);
  EXPECT_EQ(c.reduce_chunk_elements, 64u);
  EXPECT_EQ(c.loss_scaler.initial_scale, 1024);
  EXPECT_EQ(c.loss_scaler.growth_interval, 10);
  EXPECT_EQ(c.loss_scaler.hysteresis, 3);
  EXPECT_TRUE(c.loss_scaler.consecutive_hysteresis);
  EXPECT_EQ(c.offload, Offload::kParameters);
  EXPECT_EQ(c.host_capacity, 1048576u);
  EXPECT_FALSE(c.offload_overlap);
  EXPECT_EQ(c.offload_device, OffloadDevice::kNvme);
  EXPECT_EQ(c.nvme_path, "/local/nvme");
  EXPECT_EQ(c.nvme_chunk_elements, 4096u);
  EXPECT_EQ(c.prefetch_elements, 7u);
  EXPECT_EQ(c.max_live_elements, 8u);
  EXPECT_EQ(c.max_reuse_distance, 9);
  EXPECT_EQ(c.persistence_threshold, 10u);
  ASSERT_EQ(setup->optimizer.kind, OptimizerGroups::Kind::kSgd);
  ASSERT_EQ(setup->optimizer.size(), 2);
  EXPECT_TRUE(setup->optimizer.sgd[0].nesterov);
  EXPECT_EQ(setup->optimizer.sgd[1].weight_decay, 0.3);
  EXPECT_TRUE(setup->optimizer.sgd[1].maximize);
}

TEST(EngineJson, AdamBetas) {
  absl::StatusOr<EngineSetup> setup = ParseEngineSetup(
      R"({"optimizer": {"groups": [{"betas": [0.8, 0.95], "eps": 1e-6}], "type": "adam"}})");
  ASSERT_TRUE(setup.ok()) << setup.status();
  EXPECT_EQ(setup->optimizer.adam[0].beta1, 0.8);
  EXPECT_EQ(setup->optimizer.adam[0].beta2, 0.95);
  EXPECT_EQ(setup->optimizer.adam[0].weight_decay, 0.0);
  EXPECT_FALSE(setup->optimizer.adam[0].decoupled_weight_decay);
}

TEST(EngineJson, ErrorsNameTheKeyAndWhere) {
  const std::string opt = R"("optimizer": {"type": "adamw", "groups": [{}]})";
  EXPECT_EQ(ErrorOf(R"({"stag": 1, )" + opt + "}").substr(0, 31),
            "1:2: unknown key 'stag' in 'con");
  EXPECT_NE(ErrorOf(R"({"stage": "1", )" + opt + "}").find("'config.stage'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"stage": 5, )" + opt + "}").find("stage 5"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"param_dtype": "f64", )" + opt + "}").find("'f64', not one of f32"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"loss_scaler": {"hysteresis": 1, "scale": 2}, )" + opt + "}")
                .find("unknown key 'scale' in 'config.loss_scaler'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"stage": 1})").find("has no 'optimizer'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"optimizer": {"type": "lamb", "groups": [{}]}})").find("'lamb'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"optimizer": {"type": "adam", "groups": []}})").find("is empty"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"optimizer": {"type": "adam", "groups": [{"amsgrad": true}]}})")
                .find("unknown key 'amsgrad' in 'config.optimizer.groups[0]'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"optimizer": {"type": "adam", "groups": [{"betas": [0.9]}]}})")
                .find("does not hold two numbers"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"optimizer": {"type": "sgd", "groups": [{"lr": 1}, {"lr": -1}]}})")
                .find("config.optimizer.groups[1]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"stage": 0, "offload": "optimizer", )" + opt + "}").find("offload needs"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"gradient_accumulation_steps": 99999999999, )" + opt + "}")
                .find("too large"),
            std::string::npos);
}

}  // namespace
}  // namespace zero
