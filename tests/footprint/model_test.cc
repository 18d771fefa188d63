// Presets against their published parameter counts, and model files.
#include "footprint/model.h"

#include <string>

#include "footprint/model_json.h"
#include "footprint/presets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

struct Published {
  const char* name;
  uint64_t params;
};

class PresetCount : public ::testing::TestWithParam<Published> {};

TEST_P(PresetCount, MatchesThePublishedCount) {
  std::optional<ModelSpec> model = Preset(GetParam().name);
  ASSERT_TRUE(model.has_value());
  EXPECT_TRUE(Validate(*model).ok()) << Validate(*model);
  EXPECT_EQ(model->numel(), GetParam().params) << GetParam().name;
  EXPECT_EQ(model->name, GetParam().name);
}

// Hugging Face's counts (GPT-2 with the tied head counted once; Llama 2
// with its untied head): 124M, 355M, 774M, 1.5B, 6.74B, 13.0B, 68.98B;
// Llama 3 8B and 70B (8.03B, 70.55B), Mixtral 8x7B (46.7B).
INSTANTIATE_TEST_SUITE_P(
    Presets, PresetCount,
    ::testing::Values(Published{"gpt2-small", 124'439'808}, Published{"gpt2-medium", 354'823'168},
                      Published{"gpt2-large", 774'030'080}, Published{"gpt2-xl", 1'557'611'200},
                      Published{"zero-1.5b", 1'557'611'200}, Published{"zero-7.5b", 7'500'181'104},
                      Published{"llama2-7b", 6'738'415'616},
                      Published{"llama2-13b", 13'015'864'320},
                      Published{"llama2-70b", 68'976'648'192},
                      Published{"llama3-8b", 8'030'261'248},
                      Published{"llama3-70b", 70'553'706'496},
                      Published{"mixtral-8x7b", 46'702'792'704}));

TEST(PresetTest, ZeroPaperModelsAreTheirNominalSize) {
  // 125 layers of hidden 8192: 101.1e9.
  EXPECT_NEAR(Preset("zero-100b")->numel() / 1e9, 100.0, 2.0);
  // Table 1's Ψ: at or just above 7.5e9, so 16Ψ/64 rounds to 1.88 GB.
  EXPECT_GE(Preset("zero-7.5b")->numel(), 7'500'000'000u);
  EXPECT_LT(Preset("zero-7.5b")->numel(), 7'501'000'000u);
}

// DeepSeek-V3 is published as 671B parameters without its multi-token
// prediction module; the MLA shapes give 671,026,419,200 (within 0.01%).
TEST(PresetTest, DeepSeekV3IsItsPublishedSizeInSmallModules) {
  const ModelSpec moe = *Preset("deepseek-v3");
  EXPECT_EQ(moe.numel(), 671'026'419'200u);
  EXPECT_NEAR(moe.numel() / 671e9, 1.0, 1e-4);
  // embedding, norm, head; 61 attention sub-layers; 3 dense MLPs; in each of
  // 58 MoE layers a router and (256 + 1) experts of 3 projections.
  EXPECT_EQ(moe.modules.size(), 3u + 61 + 3 + 58 * (1 + 257 * 3));
  EXPECT_EQ(moe.modules.back().name, "lm_head");
  EXPECT_EQ(moe.largest_module_numel(), 129280u * 7168);  // the embedding and the head
  EXPECT_TRUE(Validate(moe).ok());
}

TEST(PresetTest, GptTiesItsHeadToTheEmbeddingAndLlamaDoesNot) {
  const ModelSpec gpt = *Preset("gpt2-small");
  const std::vector<int> order = gpt.ForwardOrder();
  EXPECT_EQ(gpt.modules[order.front()].name, "wte");
  EXPECT_EQ(gpt.modules[order.back()].name, "wte");
  EXPECT_EQ(order.size(), gpt.modules.size() + 1);
  EXPECT_EQ(gpt.largest_module_numel(), 50257u * 768);
  const ModelSpec llama = *Preset("llama2-70b");
  EXPECT_EQ(llama.modules.back().name, "lm_head");
  EXPECT_EQ(llama.ForwardOrder().size(), llama.modules.size());
  // 2 * 80 sub-layers + embedding, final norm, head.
  EXPECT_EQ(llama.modules.size(), 163u);
  EXPECT_EQ(llama.largest_module_numel(), 3u * 8192 * 28672 + 8192);  // an MLP sub-layer
  const std::vector<ParamSpec> specs = llama.ToParamSpecs();
  EXPECT_EQ(specs[2].name, "layers.0.attn.self_attn.q_proj.weight");
  EXPECT_EQ(specs[3].numel, 1024u * 8192);  // k_proj: 8 KV heads of 128
  EXPECT_EQ(specs[3].module, 1);
}

TEST(PresetTest, UnknownNameIsNullopt) {
  EXPECT_FALSE(Preset("gpt3").has_value());
  EXPECT_EQ(PresetNames().size(), 14u);
}

constexpr char kGood[] = R"({
  "name": "tiny",
  "modules": [
    {"name": "embed", "params": [{"name": "weight", "shape": [1000, 64]}]},
    {"name": "layer", "repeat": 2, "modules": [
      {"name": "attn", "params": [{"name": "wq", "shape": [64, 64]},
                                  {"name": "bias", "shape": [64]}]},
      {"name": "mlp", "params": [{"name": "w", "shape": [64, 256]}]}
    ]},
    {"name": "expert", "repeat": 2, "params": [{"name": "w", "shape": [8, 8]}]}
  ],
  "forward": ["embed", "layer.0.attn", "layer.0.mlp", "layer.1.attn", "layer.1.mlp",
              "expert.0", "expert.1", "embed"]
})";

TEST(ModelJsonTest, ReadsModulesGroupsRepeatsAndForward) {
  absl::StatusOr<ModelSpec> model = ModelFromJson(kGood, "tiny.json");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name, "tiny");
  ASSERT_EQ(model->modules.size(), 7u);
  EXPECT_EQ(model->modules[1].name, "layer.0.attn");
  EXPECT_EQ(model->modules[4].name, "layer.1.mlp");
  EXPECT_EQ(model->modules[6].name, "expert.1");
  EXPECT_EQ(model->numel(), 64000u + 2 * (4096 + 64 + 16384) + 2 * 64);
  EXPECT_EQ(model->forward.size(), 8u);
  EXPECT_EQ(model->forward.back(), 0);
  EXPECT_EQ(model->ToParamSpecs()[1].name, "layer.0.attn.wq");
}

TEST(ModelJsonTest, DefaultsToTheFileNameAndModuleOrder) {
  absl::StatusOr<ModelSpec> model = ModelFromJson(
      R"({"modules": [{"name": "a", "params": [{"name": "w", "shape": [3]}]}]})", "x.json");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name, "x.json");
  EXPECT_EQ(model->ForwardOrder(), std::vector<int>{0});
}

// Repeats multiply; what they would expand to is refused before anything
// is expanded (the 1e12-module case once ran out of memory), in one line
// naming the limit and the repeats.
TEST(ModelJsonTest, NestedRepeatsPastTheModuleLimitAreRefused) {
  absl::StatusOr<ModelSpec> model = ModelFromJson(
      R"({"modules": [{"name": "layers", "repeat": 1000000, "modules": [)"
      R"({"name": "experts", "repeat": 1000000, "params": [{"name": "w", "shape": [16]}]}]}]})",
      "m.json");
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(model.status()));
  EXPECT_EQ(model.status().message(),
            "m.json:1:43: \"layers\" repeat 1000000 x \"experts\" repeat 1000000 = 1e+12 "
            "modules, over the limit of 2000000 modules");
}

TEST(ModelJsonTest, RepeatsPastTheParameterAndNameLimitsAreRefused) {
  const std::string ten_params =
      R"({"name": "a", "shape": [1]}, {"name": "b", "shape": [1]}, {"name": "c", "shape": [1]},)"
      R"({"name": "d", "shape": [1]}, {"name": "e", "shape": [1]}, {"name": "f", "shape": [1]},)"
      R"({"name": "g", "shape": [1]}, {"name": "h", "shape": [1]}, {"name": "i", "shape": [1]},)"
      R"({"name": "j", "shape": [1]})";
  absl::StatusOr<ModelSpec> model = ModelFromJson(
      R"({"modules": [{"name": "m", "repeat": 1000000, "params": [)" + ten_params + "]}]}",
      "p.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "p.json:1:38: \"m\" repeat 1000000 = 1e+07 parameters, over the limit of 8000000 "
            "parameters");
  const std::string long_name(600, 'x');
  model = ModelFromJson(R"({"modules": [{"name": "g", "repeat": 1000, "modules": [{"name": ")" +
                            long_name + R"(", "repeat": 1000, "params": [{"name": "w", "shape": [1]}]}]}]})",
                        "n.json");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              ::testing::MatchesRegex("n\\.json:1:38: \"g\" repeat 1000 x \"x+\" repeat 1000 = "
                                      "1\\.2.e\\+09 bytes of names, over the limit of 536870912 "
                                      "bytes of names"));
}

struct BadModel {
  const char* text;
  const char* message;
};

class MalformedModel : public ::testing::TestWithParam<BadModel> {};

TEST_P(MalformedModel, SaysWhatAndWhere) {
  absl::StatusOr<ModelSpec> model = ModelFromJson(GetParam().text, "m.json");
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(model.status()));
  EXPECT_EQ(std::string(model.status().message()), GetParam().message);
}

#define MODULE(name, shape) \
  "{\"name\": \"" name "\", \"params\": [{\"name\": \"w\", \"shape\": " shape "}]}"

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedModel,
    ::testing::Values(
        BadModel{"{\"modules\": [", "m.json:1:14: expected a value, found end of input"},
        BadModel{"[]", "m.json:1:1: the model must be an object, found an array"},
        BadModel{"{}", "m.json:1:1: the model has no \"modules\""},
        BadModel{"{\"modules\": []}", "m.json:1:13: \"modules\" is empty"},
        BadModel{
            "{\"modules\": [" MODULE("a", "[3]") "], \"extra\": 1}",
            "m.json:1:71: unknown key \"extra\" in the model (expected name, modules, forward)"},
        BadModel{
            "{\"modules\": [" MODULE("a", "[3, 0]") "]}",
            "m.json:1:66: a dimension must be an integer from 1 to 288230376151711744, found 0"},
        BadModel{"{\"modules\": [" MODULE("a", "[]") "]}",
                 "m.json:1:62: \"shape\" has no dimensions"},
        BadModel{
            "{\"modules\": [" MODULE("a", "[2.5]") "]}",
            "m.json:1:63: a dimension must be an integer from 1 to 288230376151711744, found 2.5"},
        BadModel{"{\"modules\": [" MODULE("a", "\"3\"") "]}",
                 "m.json:1:62: \"shape\" must be an array, found a string"},
        BadModel{"{\"modules\": [" MODULE("a", "[3]") ",\n " MODULE("a", "[4]") "]}",
                 "m.json:2:11: duplicate module name 'a'"},
        BadModel{"{\"modules\": [{\"name\": \"a\", \"params\": [{\"name\": \"w\", \"shape\": [1]}, "
                 "{\"name\": \"w\", \"shape\": [2]}]}]}",
                 "m.json:1:77: duplicate parameter name 'w' in module 'a'"},
        BadModel{"{\"modules\": [{\"name\": \"a\", \"params\": []}]}",
                 "m.json:1:38: module 'a' has no parameters"},
        BadModel{"{\"modules\": [{\"name\": \"\", \"params\": []}]}",
                 "m.json:1:23: a module's \"name\" is empty"},
        BadModel{"{\"modules\": [{\"params\": [{\"name\": \"w\", \"shape\": [1]}]}]}",
                 "m.json:1:14: a module has no \"name\""},
        BadModel{"{\"modules\": [{\"name\": \"g\", \"repeat\": 2, \"modules\": [" MODULE(
                     "a", "[1]") "]}, " MODULE("g.1.a", "[1]") "]}",
                 "m.json:1:120: duplicate module name 'g.1.a'"},
        BadModel{"{\"modules\": [{\"name\": \"a\", \"repeat\": 0, \"params\": []}]}",
                 "m.json:1:38: \"repeat\" must be an integer from 1 to 1000000, found 0"},
        BadModel{"{\"modules\": [" MODULE("a", "[1]") "], \"forward\": [\"b\"]}",
                 "m.json:1:83: forward uses unknown module 'b'"},
        BadModel{
            "{\"modules\": [" MODULE("a", "[1]") ", " MODULE("b", "[1]") "], \"forward\": [\"a\"]}",
            "m.json:1:138: module 'b' is never used in \"forward\""},
        BadModel{
            "{\"modules\": [{\"name\": \"a\", \"params\": [{\"name\": \"w\", \"shap\": [1]}]}]}",
            "m.json:1:53: unknown key \"shap\" in a parameter (expected name, shape)"}));

// The example shipped in footprint/models/: Llama 3 8B (GQA, 128k
// vocabulary, untied head) has 8,030,261,248 parameters.
TEST(ModelJsonTest, ExampleFileIsLlamaThreeEightB) {
  absl::StatusOr<ModelSpec> model = LoadModelFile("footprint/models/llama3-8b.json");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name, "llama3-8b");
  EXPECT_EQ(model->numel(), 8'030'261'248u);
  EXPECT_EQ(model->modules.size(), 2u * 32 + 3);
  EXPECT_EQ(model->modules[2].name, "layers.0.mlp");
}

TEST(ModelJsonTest, MissingFileSaysSo) {
  absl::StatusOr<ModelSpec> model = LoadModelFile("/nonexistent/model.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "/nonexistent/model.json: cannot read the model file: No such file or directory");
}

TEST(ModelTest, ValidateCatchesWhatBuildersCanGetWrong) {
  ModelBuilder b("m");
  b.Module("a").Param("w", {3, 0});
  EXPECT_EQ(Validate(std::move(b).Build()).message(),
            "module 'a', parameter 'w': shape has a zero dimension");
  ModelBuilder c("m");
  c.Module("a.b").Param("c", {1});
  c.Module("a").Param("b.c", {1});
  EXPECT_EQ(Validate(std::move(c).Build()).message(),
            "module 'a': parameter 'b.c' is named 'a.b.c' like another one");
  ModelBuilder d("m");
  d.Module("a").Param("w", {uint64_t{1} << 40, uint64_t{1} << 40});
  EXPECT_EQ(Validate(std::move(d).Build()).message(),
            "module 'a', parameter 'w': more than 2^58 elements");
}

}  // namespace
}  // namespace zero::footprint
