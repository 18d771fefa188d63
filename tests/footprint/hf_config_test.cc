// Hugging Face config.json files (tests/footprint/testdata/*/config.json,
// copies of the published configs) against the published parameter counts,
// which are also what `transformers` 5.24 builds from them on the meta
// device (tests/footprint/hf_param_counts.py, run by hand); and the one-line
// errors for what the reader does not take.
#include "footprint/hf_config.h"

#include <string>

#include "footprint/activations.h"
#include "footprint/experiment.h"
#include "footprint/model_json.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

constexpr char kTestdata[] = "tests/footprint/testdata/";

struct Published {
  const char* name;
  uint64_t params;
};

class HfCount : public ::testing::TestWithParam<Published> {};

TEST_P(HfCount, MatchesThePublishedCount) {
  const std::string path = std::string(kTestdata) + GetParam().name + "/config.json";
  absl::StatusOr<ModelSpec> model = LoadModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->name, GetParam().name);
  EXPECT_EQ(model->numel(), GetParam().params);
  EXPECT_TRUE(Validate(*model).ok());
  ASSERT_TRUE(model->transformer.has_value());
  EXPECT_EQ(model->sites.size(), model->ForwardOrder().size());
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfCount,
    ::testing::Values(Published{"gpt2", 124'439'808}, Published{"llama-2-7b", 6'738'415'616},
                      Published{"llama-3-8b", 8'030'261'248},
                      Published{"llama-3-70b", 70'553'706'496},
                      Published{"mistral-7b", 7'241'732'096},
                      Published{"mixtral-8x7b", 46'702'792'704},
                      Published{"qwen2-7b", 7'615'616'512}, Published{"qwen2-0.5b", 494'032'768},
                      Published{"phi-3-mini", 3'821'079'552},
                      Published{"gemma-7b", 8'537'680'896},
                      Published{"pythia-160m", 162'322'944},
                      Published{"qwen1.5-moe-a2.7b", 14'315'784'192}),
    [](const auto& info) {
      std::string name = info.param.name;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

ModelSpec Load(const std::string& name) {
  absl::StatusOr<ModelSpec> model = LoadModelFile(std::string(kTestdata) + name + "/config.json");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.value_or(ModelSpec{});
}

TEST(HfConfigTest, TiedHeadsUseTheEmbeddingTwice) {
  for (const char* tied : {"gpt2", "qwen2-0.5b", "gemma-7b"}) {
    const ModelSpec model = Load(tied);
    EXPECT_TRUE(model.transformer->tied_embeddings) << tied;
    EXPECT_EQ(model.ForwardOrder().back(), model.ForwardOrder().front()) << tied;
  }
  const ModelSpec untied = Load("qwen2-7b");
  EXPECT_EQ(untied.modules.back().name, "lm_head");
}

TEST(HfConfigTest, FamiliesKeepTheirLayouts) {
  // Qwen2: grouped queries (4 KV heads of 128) with biases on q, k, v only.
  const ModelSpec qwen = Load("qwen2-7b");
  const std::vector<ParamSpec> specs = qwen.ToParamSpecs();
  EXPECT_EQ(specs[3].name, "layers.0.attn.self_attn.q_proj.bias");
  EXPECT_EQ(specs[4].name, "layers.0.attn.self_attn.k_proj.weight");
  EXPECT_EQ(specs[4].numel, 512u * 3584);
  EXPECT_EQ(specs[5].name, "layers.0.attn.self_attn.k_proj.bias");
  EXPECT_EQ(specs[8].name, "layers.0.attn.self_attn.o_proj.weight");
  // Phi-3: fused qkv and gate-up projections.
  EXPECT_EQ(Load("phi-3-mini").ToParamSpecs()[2].name, "layers.0.attn.self_attn.qkv_proj.weight");
  // GPT-NeoX: parallel residual, LayerNorms with biases.
  const ModelSpec neox = Load("pythia-160m");
  EXPECT_TRUE(neox.transformer->parallel_residual);
  EXPECT_EQ(neox.transformer->norm, NormKind::kLayerNorm);
  // Gemma: 16 heads of 256 on a hidden size of 3072.
  EXPECT_EQ(Load("gemma-7b").transformer->q_width(), 4096u);
  // Qwen MoE: a router, 60 experts and a shared expert per layer.
  const ModelSpec moe = Load("qwen1.5-moe-a2.7b");
  EXPECT_EQ(moe.modules.size(), 24u * (1 + 1 + 60 + 1) + 3);
}

// The measured bytes of a layer equal the accounting for the families the
// presets do not cover (parallel residual, fused projections, a wider
// attention, shared experts).
TEST(HfConfigTest, ActivationsAreMeasuredForEveryFamily) {
  for (const char* name : {"pythia-160m", "phi-3-mini", "gemma-7b", "qwen2-0.5b",
                           "qwen1.5-moe-a2.7b"}) {
    const ModelSpec model = Load(name);
    const ActivationOptions a{.seq = 256, .micro_batch = 1};
    const Experiment e{&model, 8, 3, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone, a};
    absl::StatusOr<Measurement> m = RunExperiment(e, Knobs{});
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->layer_activations, LayerSavedBytes(*model.transformer, *e.ActivationsFor()).value())
        << name;
  }
}

struct BadConfig {
  const char* text;
  const char* message;  // after "FILE:"
};

class HfBad : public ::testing::TestWithParam<BadConfig> {};

TEST_P(HfBad, OneLineNamingIt) {
  absl::StatusOr<ModelSpec> model = ModelFromJson(GetParam().text, "c.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(std::string(model.status().message()), std::string("c.json:") + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HfBad,
    ::testing::Values(
        BadConfig{R"({"model_type": "bert", "hidden_size": 768})",
                  "1:16: model_type 'bert' is not supported (supported: gpt2, llama, mistral, "
                  "qwen2, phi3, gemma, mixtral, qwen2_moe, gpt_neox)"},
        BadConfig{R"({"model_type": 7})",
                  "1:16: model_type a number is not supported (supported: gpt2, llama, mistral, "
                  "qwen2, phi3, gemma, mixtral, qwen2_moe, gpt_neox)"},
        BadConfig{R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "vocab_size": 100})",
                  "1:1: llama config has no \"intermediate_size\""},
        BadConfig{R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4})",
                  "1:1: gpt2 config has no \"vocab_size\""},
        BadConfig{R"({"model_type": "mistral", "hidden_size": "4096"})",
                  "1:42: \"hidden_size\" must be an integer from 1 to 16777216, found a string"},
        BadConfig{R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 0})",
                  "1:65: \"num_hidden_layers\" must be an integer from 1 to 16777216, found 0"},
        BadConfig{R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                      "tie_word_embeddings": "yes"})",
                  "3:46: \"tie_word_embeddings\" must be true or false, found a string"},
        BadConfig{R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                      "num_key_value_heads": 3})",
                  "1:1: 4 attention heads are not a multiple of 3 KV heads"},
        BadConfig{R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                      "num_local_experts": 8})",
                  "1:1: mixtral config has no \"num_experts_per_tok\""},
        BadConfig{R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                      "num_local_experts": 2, "num_experts_per_tok": 3})",
                  "1:1: num_experts_per_tok 3 is more than the 2 experts"},
        // Checked before the model is built (it took gigabytes, then aborted).
        BadConfig{R"({"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 1000000,
                      "num_attention_heads": 1, "intermediate_size": 16, "vocab_size": 16})",
                  "1:1: 1000000 layers make more than 2000000 modules"},
        BadConfig{R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 20000,
                      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                      "num_local_experts": 200, "num_experts_per_tok": 2})",
                  "1:1: 20000 layers of 200 experts make more than 2000000 modules"},
        // Its parameter count wrapped 64 bits (an allocation of 3072 PiB).
        BadConfig{R"({"model_type": "llama", "hidden_size": 16777216, "num_hidden_layers": 16384,
                      "num_attention_heads": 1, "intermediate_size": 16777216,
                      "vocab_size": 16777216})",
                  "1:1: more than 2^58 parameters in all"},
        BadConfig{R"({"model_type": "llama", "hidden_size": 4, "num_hidden_layers": 2,
                      "num_attention_heads": 8, "intermediate_size": 16, "vocab_size": 16})",
                  "1:1: the hidden size 4 is smaller than its 8 attention heads"},
        // Dense layers would change the count: refused, not ignored.
        BadConfig{R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 2,
                      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                      "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                      "shared_expert_intermediate_size": 64, "mlp_only_layers": [0]})",
                  "1:1: qwen2_moe with dense layers (decoder_sparse_step, mlp_only_layers) is "
                  "not supported"}));

}  // namespace
}  // namespace zero::footprint
