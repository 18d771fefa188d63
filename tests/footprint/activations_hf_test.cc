// The transformers accounting (--kernels=transformers, activations_hf.h):
// what it keeps per layer, tensor by tensor, for the families and options
// whose figures footprint/validate_transformers.py checks against the real
// classes on the CPU (tests/python/test_footprint_hf.py); the card's
// choices beside the CPU's; the options it refuses; the config keys it
// reads; and the pool's measurement equal to the accounting.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>

#include "footprint/activations.h"
#include "footprint/experiment.h"
#include "footprint/model_json.h"
#include "footprint/presets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/footprint/run_footprint.h"

namespace zero::footprint {
namespace {

ActivationOptions Hf(uint64_t seq, uint64_t micro_batch, Attention attention,
                     Checkpointing checkpointing = Checkpointing::kNone,
                     Backend backend = Backend::kGpu) {
  return {.seq = seq,
          .micro_batch = micro_batch,
          .attention = attention,
          .checkpointing = checkpointing,
          .kernels = Kernels::kTransformers,
          .backend = backend};
}

uint64_t Layer(const TransformerShape& shape, const ActivationOptions& o) {
  absl::StatusOr<uint64_t> bytes = LayerSavedBytes(shape, o);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.value_or(0);
}

ModelSpec FromConfig(const std::string& json) {
  absl::StatusOr<ModelSpec> model = ModelFromJson(json, "m/config.json");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.value_or(ModelSpec{});
}

// Llama 3 8B (h 4096, 32 heads of 128, 8 KV heads, f 14336), bf16, one
// sequence of 1024. Each RMSNorm keeps x.float() (4Th), rstd (4T), the
// cast normalized tensor and its output (2Th each).
constexpr uint64_t kT = 1024, kH = 4096, kQ = 4096, kKv = 1024, kF = 14336, kA = 32;
constexpr uint64_t kNorm = 4 * kT * kH + 4 * kT + 2 * 2 * kT * kH;
constexpr uint64_t kMlp = kNorm + 4 * 2 * kT * kF;  // gate, up, silu(gate), product

TEST(TransformersActivations, LlamaSdpaKeepsRotatedQKAndTheKernelsOutputs) {
  const TransformerShape s = *Preset("llama3-8b")->transformer;
  // q and k rotated, v as projected (grouped: no repeat), the output (the
  // output projection reads it as a view), the fp32 log-sum-exp.
  const uint64_t attention = kNorm + 2 * kT * (kQ + 2 * kKv) + 2 * kT * kQ + 4 * kA * kT;
  EXPECT_EQ(Layer(s, Hf(1024, 1, Attention::kSdpa)), attention + kMlp);
  // flash-attn keeps the same; the CPU's sdpa (no dropout) too.
  EXPECT_EQ(Layer(s, Hf(1024, 1, Attention::kFlash)), attention + kMlp);
  EXPECT_EQ(Layer(s, Hf(1024, 1, Attention::kSdpa, Checkpointing::kNone, Backend::kCpu)),
            attention + kMlp);
}

TEST(TransformersActivations, LlamaEagerKeepsRepeatedHeadsAndBothSoftmaxes) {
  const TransformerShape s = *Preset("llama3-8b")->transformer;
  const uint64_t scores = kA * 1024 * kT;
  // q (viewed: one sequence), k and v repeated to 32 heads, the fp32
  // softmax and its bf16 cast, the merged heads.
  const uint64_t attention = kNorm + 2 * kT * kQ * 3 + 4 * scores + 2 * scores + 2 * kT * kQ;
  EXPECT_EQ(Layer(s, Hf(1024, 1, Attention::kEager)), attention + kMlp);
}

TEST(TransformersActivations, FullCheckpointingKeepsEachLayersInput) {
  const TransformerShape s = *Preset("llama3-8b")->transformer;
  for (Attention a : {Attention::kEager, Attention::kSdpa, Attention::kFlash}) {
    EXPECT_EQ(Layer(s, Hf(1024, 1, a, Checkpointing::kFull)), 2 * kT * kH);
  }
}

// GPT-2 small at 1024 x 2: a card keeps LayerNorm's mean and rstd in fp32
// and bool dropout masks; the CPU both in bf16. sdpa with dropout runs
// flash on a card (q, k, v views of the fused projection: all of it) and
// the fp32 math path on the CPU.
TEST(TransformersActivations, GptOnACardAndOnTheCpu) {
  const TransformerShape s = *Preset("gpt2-small")->transformer;
  const uint64_t t = 2048, h = 768, a = 12, scores = a * 1024 * t;
  const ActivationOptions card = Hf(1024, 2, Attention::kEager);
  ActivationOptions cpu = card;
  cpu.backend = Backend::kCpu;
  const uint64_t statistics = 2 * 2 * t * (4 - 2);  // two LayerNorms' mean and rstd
  const uint64_t masks = scores + 2 * t * h;  // probabilities', two sub-layers': 1 byte more each
  EXPECT_EQ(Layer(s, card) + masks, Layer(s, cpu) + statistics);
  // gelu_new keeps its input, tanh, 1 + tanh and x/2 (4 x T x 4h) beside
  // the product's input; LayerNorms keep input, mean, rstd and output.
  const uint64_t layer_norms = 2 * (2 * 2 * t * h + 2 * 4 * t);
  const uint64_t mlp = 2 * t * 4 * h * 5 + t * h;  // + its dropout mask
  const uint64_t eager = 2 * t * h * 3 + 2 * scores + scores + 2 * scores + 2 * t * h + t * h;
  EXPECT_EQ(Layer(s, card), layer_norms + eager + mlp);
  const uint64_t flash = 2 * t * 3 * h + 2 * t * h + 4 * a * t + t * h;
  EXPECT_EQ(Layer(s, Hf(1024, 2, Attention::kSdpa)), layer_norms + flash + mlp);
  const uint64_t math = 4 * t * h * 3 + 3 * 4 * scores + 2 * t * h + t * h * 2;
  cpu.attention = Attention::kSdpa;
  EXPECT_EQ(Layer(s, cpu), layer_norms - statistics + math + mlp + t * h);
}

TEST(TransformersActivations, SelectiveCheckpointingIsNotTransformers) {
  const TransformerShape s = *Preset("llama2-7b")->transformer;
  absl::StatusOr<SiteActivations> site =
      ActivationsOf(Site::kAttention, s, Hf(512, 1, Attention::kEager, Checkpointing::kSelective));
  ASSERT_FALSE(site.ok());
  EXPECT_NE(std::string(site.status().message()).find("recomputes whole layers"),
            std::string::npos);
  ActivationOptions fused = Hf(512, 1, Attention::kEager, Checkpointing::kSelective);
  fused.kernels = Kernels::kFused;
  EXPECT_TRUE(ActivationsOf(Site::kAttention, s, fused).ok());
  EXPECT_TRUE(ValidateActivationOptions(fused).ok());
}

TEST(TransformersActivations, AnActivationItDoesNotModelIsAnError) {
  const ModelSpec m = FromConfig(R"({"model_type": "llama", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "vocab_size": 256, "hidden_act": "xielu"})");
  ASSERT_TRUE(m.transformer.has_value());
  EXPECT_EQ(m.transformer->act, HiddenAct::kOther);
  absl::StatusOr<SiteActivations> site = ActivationsOf(Site::kMlp, *m.transformer,
                                                       Hf(64, 1, Attention::kSdpa));
  ASSERT_FALSE(site.ok());
  EXPECT_EQ(site.status().code(), absl::StatusCode::kInvalidArgument);
  ActivationOptions fused = Hf(64, 1, Attention::kSdpa);
  fused.kernels = Kernels::kFused;
  EXPECT_TRUE(ActivationsOf(Site::kMlp, *m.transformer, fused).ok());
}

TEST(TransformersActivations, ConfigKeysItReads) {
  const TransformerShape gpt2 = *FromConfig(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2,
      "n_head": 4, "vocab_size": 256, "attn_pdrop": 0.0, "embd_pdrop": 0.0})").transformer;
  EXPECT_EQ(gpt2.family, Family::kGpt2);
  EXPECT_EQ(gpt2.act, HiddenAct::kGeluNew);
  EXPECT_FALSE(gpt2.attention_dropout);
  EXPECT_TRUE(gpt2.residual_dropout);  // resid_pdrop's default, 0.1
  EXPECT_FALSE(gpt2.embedding_dropout);
  const char* kLlamaKeys = R"("hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
      "vocab_size": 256)";
  const TransformerShape mistral =
      *FromConfig(std::string(R"({"model_type": "mistral", )") + kLlamaKeys + "}").transformer;
  EXPECT_EQ(mistral.sliding_window, 4096u);  // MistralConfig's default
  const TransformerShape mixtral = *FromConfig(std::string(R"({"model_type": "mixtral",
      "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": null, )") +
                                               kLlamaKeys + "}")
                                        .transformer;
  EXPECT_EQ(mixtral.sliding_window, 0u);
  EXPECT_TRUE(mixtral.norm_topk);
  const TransformerShape qwen = *FromConfig(std::string(R"({"model_type": "qwen2_moe",
      "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
      "shared_expert_intermediate_size": 64, "sliding_window": 32, "attention_dropout": 0.1, )") +
                                            kLlamaKeys + "}")
                                     .transformer;
  EXPECT_EQ(qwen.family, Family::kQwen2Moe);
  EXPECT_FALSE(qwen.norm_topk);           // norm_topk_prob's default
  EXPECT_EQ(qwen.sliding_window, 0u);     // only with use_sliding_window
  EXPECT_TRUE(qwen.attention_dropout);
  const TransformerShape neox = *FromConfig(R"({"model_type": "gpt_neox", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 256,
      "vocab_size": 256, "hidden_dropout": 0.1})").transformer;
  EXPECT_EQ(neox.act, HiddenAct::kGelu);
  EXPECT_TRUE(neox.residual_dropout);
  EXPECT_TRUE(neox.embedding_dropout);
}

// A sliding window shorter than the sequence gives sdpa a mask: grouped k
// and v are repeated and every layer keeps the mask in the model's dtype.
// flash-attn windows by itself.
TEST(TransformersActivations, AWindowMaskRepeatsGroupedKeysAndValues) {
  const TransformerShape s = *Preset("llama3-8b")->transformer;
  TransformerShape windowed = s;
  windowed.sliding_window = 512;
  const uint64_t plain = Layer(s, Hf(1024, 1, Attention::kSdpa));
  EXPECT_EQ(Layer(windowed, Hf(1024, 1, Attention::kSdpa)),
            plain + 2 * 2 * kT * (kQ - kKv) + 1024 * 1024 * 2);
  EXPECT_EQ(Layer(windowed, Hf(1024, 1, Attention::kFlash)), plain);
  windowed.sliding_window = 2048;
  EXPECT_EQ(Layer(windowed, Hf(1024, 1, Attention::kSdpa)), plain);
}

// --kernels is an axis like the others: a column when it varies, a field
// of the JSON, in the label when not the default.
TEST(TransformersActivations, KernelsIsASweepAxis) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string json = std::string(dir != nullptr ? dir : "/tmp") + "/kernels.json";
  Result r = Footprint({"--model=gpt2-small", "--ranks=8", "--stage=3", "--seq=512",
                        "--kernels=fused,transformers", "--attention=eager,sdpa",
                        "--json=" + json});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("  kern  "));
  EXPECT_THAT(r.err, ::testing::HasSubstr("seq=512 mb=1 sdpa fused\n"));
  EXPECT_THAT(r.err,
              ::testing::HasSubstr("[4/4] gpt2-small N=8 stage 3 bf16 adam seq=512 mb=1 sdpa\n"));
  std::ifstream in(json);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::HasSubstr("\"kernels\": \"fused\""));
  EXPECT_THAT(text, ::testing::HasSubstr("\"kernels\": \"transformers\""));
  EXPECT_THAT(text, ::testing::HasSubstr("\"backend\": \"gpu\""));
  // One kernels, on the CPU: said once above the table.
  r = Footprint({"--model=gpt2-small", "--ranks=8", "--stage=3", "--seq=512", "--backend=cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("transformers kernels on the CPU, sdpa attention"));
  // The planner answers for the kernels given, one at a time.
  r = Footprint({"--plan", "--model=gpt2-small", "--cards=2", "--seq=512", "--micro_batch=1",
                 "--kernels=fused"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("Activations: seq 512, fused kernels, sdpa attention"));
  r = Footprint({"--plan", "--model=gpt2-small", "--kernels=fused,transformers"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "footprint: --plan: give one --kernels, not 2 (plan each separately)\n");
}

using Case = std::tuple<const char*, Attention, Checkpointing, Backend>;
class Measured : public ::testing::TestWithParam<Case> {};

// The pool's measurement between the middle layer's forward and backward
// is the accounting, for transformers kernels as for fused ones.
TEST_P(Measured, OnThePoolEqualsTheAccounting) {
  const auto [name, attention, checkpointing, backend] = GetParam();
  const ModelSpec model = *Preset(name);
  const ActivationOptions a = Hf(256, 2, attention, checkpointing, backend);
  Experiment e{&model, 8, 0, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone, a};
  absl::StatusOr<Measurement> m = RunExperiment(e, Knobs{});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layer_activations, Layer(*model.transformer, a));
  EXPECT_GT(m->activations, m->layer_activations);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, Measured,
    ::testing::Combine(::testing::Values("gpt2-small", "llama3-8b", "mixtral-8x7b"),
                       ::testing::Values(Attention::kEager, Attention::kSdpa),
                       ::testing::Values(Checkpointing::kNone, Checkpointing::kFull),
                       ::testing::Values(Backend::kGpu, Backend::kCpu)));

}  // namespace
}  // namespace zero::footprint
