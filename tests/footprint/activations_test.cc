// Activations measured on the pool: what a layer keeps between its forward
// and its backward equals this program's accounting (activations.h) for
// every family and option, and relates to Korthikanti et al. 2022 as
// footprint/README.md says: GPT-2 with eager attention is the paper's
// s*b*h*(34 + 5*a*s/h) plus the LayerNorms' 16 bytes per token, selective
// 34*s*b*h plus those, full 2*s*b*h exactly.
#include "footprint/activations.h"

#include <algorithm>
#include <tuple>

#include "footprint/experiment.h"
#include "footprint/model_json.h"
#include "footprint/presets.h"
#include "footprint/row.h"
#include "footprint/step_script.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

Measurement Measure(const ModelSpec& model, const ActivationOptions& a, int stage = 0,
                Precision precision = Precision::kBF16) {
  Experiment e{&model, 8, stage, precision, OptimizerKind::kAdam, Offload::kNone, a};
  absl::StatusOr<Measurement> m = RunExperiment(e, Knobs{});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(Measurement{});
}

ActivationOptions Options(uint64_t seq, uint64_t micro_batch, Attention attention,
                          Checkpointing checkpointing) {
  return {.seq = seq,
          .micro_batch = micro_batch,
          .attention = attention,
          .checkpointing = checkpointing};
}

class PerLayer : public ::testing::TestWithParam<std::tuple<const char*, Attention, Checkpointing>> {};

TEST_P(PerLayer, MeasuredOnThePoolEqualsTheAccounting) {
  const auto [name, attention, checkpointing] = GetParam();
  const ModelSpec model = *Preset(name);
  ActivationOptions a = Options(256, 2, attention, checkpointing);
  const Measurement m = Measure(model, a);
  ASSERT_TRUE(m.has_activations);
  a.element_bytes = 2;
  absl::StatusOr<uint64_t> accounted = LayerSavedBytes(*model.transformer, a);
  ASSERT_TRUE(accounted.ok()) << accounted.status();
  EXPECT_EQ(m.layer_activations, *accounted);
  EXPECT_GT(m.activations, *accounted);  // transients, gradients, the head
}

INSTANTIATE_TEST_SUITE_P(
    Families, PerLayer,
    ::testing::Combine(::testing::Values("gpt2-small", "llama2-7b", "llama3-8b", "mixtral-8x7b"),
                       ::testing::Values(Attention::kEager, Attention::kFlash),
                       ::testing::Values(Checkpointing::kNone, Checkpointing::kSelective,
                                         Checkpointing::kFull)));

// GPT-2 small (h 768, a 12) at s = 1024, b = 2, 16-bit.
TEST(ActivationsTest, GptIsKorthikantiPlusLayerNormStatistics) {
  const TransformerShape shape = *Preset("gpt2-small")->transformer;
  const uint64_t s = 1024, b = 2, h = 768, a = 12, tokens = s * b;
  const uint64_t sbh = s * b * h, layer_norms = 2 * 8 * tokens;
  const struct {
    Attention attention;
    Checkpointing checkpointing;
    uint64_t bytes;
  } cases[] = {
      {Attention::kEager, Checkpointing::kNone, 34 * sbh + 5 * a * s * s * b + layer_norms},
      {Attention::kEager, Checkpointing::kSelective, 34 * sbh + layer_norms},
      {Attention::kEager, Checkpointing::kFull, 2 * sbh},
      // Flash keeps the log-sum-exp, a fp32 per head and token.
      {Attention::kFlash, Checkpointing::kNone, 34 * sbh + 4 * a * tokens + layer_norms},
      {Attention::kFlash, Checkpointing::kFull, 2 * sbh},
  };
  for (const auto& c : cases) {
    ActivationOptions o = Options(s, b, c.attention, c.checkpointing);
    EXPECT_EQ(LayerSavedBytes(shape, o).value(), c.bytes);
    const double paper = KorthikantiLayerBytes(shape, o);
    EXPECT_EQ(paper, c.checkpointing == Checkpointing::kFull ? 2.0 * sbh
                     : c.checkpointing == Checkpointing::kNone && c.attention == Attention::kEager
                         ? sbh * (34 + 5.0 * a * s / h)
                         : 34.0 * sbh);
  }
}

// Llama 2 7B (h 4096, f 11008, a 32 heads of 128, no grouping), flash: the
// RMSNorms' input, rstd and output; v, rotated q and k, the attention
// output, its log-sum-exp; gate, up, silu(gate) and the product.
TEST(ActivationsTest, LlamaKeepsWhatItsFusedKernelsSave) {
  const TransformerShape shape = *Preset("llama2-7b")->transformer;
  const uint64_t tokens = 4096, h = 4096, f = 11008, a = 32;
  ActivationOptions o = Options(4096, 1, Attention::kFlash, Checkpointing::kNone);
  const uint64_t attention = 2 * tokens * (h + h + 4 * h) + 4 * tokens + 4 * a * tokens;
  const uint64_t mlp = 2 * tokens * (h + h + 4 * f) + 4 * tokens;
  EXPECT_EQ(LayerSavedBytes(shape, o).value(), attention + mlp);
  // fp32 doubles the tensors but not the fp32 statistics.
  o.element_bytes = 4;
  EXPECT_EQ(LayerSavedBytes(shape, o).value(), 2 * (attention + mlp) - 2 * 4 * tokens -
                                                   4 * a * tokens);
}

// Eager attention repeats Llama 3's 8 KV heads to its 32 query heads.
TEST(ActivationsTest, EagerRepeatsGroupedKeysAndValues) {
  const TransformerShape shape = *Preset("llama3-8b")->transformer;
  const uint64_t tokens = 1024, q = 4096, kv = 1024;
  const auto eager = LayerSavedBytes(shape, Options(1024, 1, Attention::kEager, Checkpointing::kSelective));
  const auto flash = LayerSavedBytes(shape, Options(1024, 1, Attention::kFlash, Checkpointing::kNone));
  // eager: k, v repeated (2q) + merged heads (q); flash: k, v (2kv) + output (q) + lse.
  EXPECT_EQ(*eager - *flash, 2 * tokens * (2 * q - 2 * kv) - 4 * 32 * tokens);
}

// Phi-3's fused qkv: flash attention reads v as a view of the projection's
// output and so keeps all of it; eager attention's products copy q, k, v.
// (footprint/validate_activations.py finds the same in PyTorch.)
TEST(ActivationsTest, FlashKeepsAFusedProjectionWhole) {
  absl::StatusOr<ModelSpec> phi3 = LoadModelFile("tests/footprint/testdata/phi-3-mini/config.json");
  ASSERT_TRUE(phi3.ok()) << phi3.status();
  const uint64_t tokens = 1024, q = 3072, kv = 3072, heads = 32;
  const auto flash =
      LayerSavedBytes(*phi3->transformer, Options(1024, 1, Attention::kFlash, Checkpointing::kNone));
  const auto eager = LayerSavedBytes(*phi3->transformer,
                                     Options(1024, 1, Attention::kEager, Checkpointing::kSelective));
  EXPECT_EQ(*flash - *eager, 2 * tokens * (q + kv) + 4 * heads * tokens);
}

TEST(ActivationsTest, ThePoolPeakHoldsStatesAndActivations) {
  const ModelSpec model = *Preset("gpt2-small");
  Experiment e{&model, 8, 0, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone, std::nullopt};
  const Measurement states = RunExperiment(e, Knobs{}).value();
  EXPECT_FALSE(states.has_activations);
  EXPECT_EQ(states.activations, 0u);
  const Measurement both = Measure(model, Options(1024, 4, Attention::kEager, Checkpointing::kNone));
  EXPECT_GE(both.peak_allocated, states.peak_allocated + both.layer_activations * 12);
  EXPECT_GE(both.peak_reserved, both.peak_allocated);
}

// Full checkpointing recomputes each layer in backward, fetching its
// attention sub-layer once more: stage 3 gathers those parameters again.
TEST(ActivationsTest, FullCheckpointingGathersAttentionAgainAtStageThree) {
  const ModelSpec model = *Preset("llama2-7b");
  const Measurement plain = Measure(model, Options(512, 1, Attention::kFlash, Checkpointing::kNone), 3);
  const Measurement full = Measure(model, Options(512, 1, Attention::kFlash, Checkpointing::kFull), 3);
  EXPECT_GT(full.sent_per_step.bytes_sent, plain.sent_per_step.bytes_sent);
  EXPECT_LT(full.activations, plain.activations / 4);
}

// A mixture's experts are its layer's modules too: full checkpointing's
// recompute gathers them again (it fetched the attention only, so the
// recomputed experts needed no weights and MoE traffic read as with no
// checkpointing). Small modules, none persistent, no prefetch.
TEST(ActivationsTest, FullCheckpointingGathersEveryExpertAgainAtStageThree) {
  const ModelSpec model = *ModelFromJson(R"({"model_type": "mixtral", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "vocab_size": 256, "num_local_experts": 4, "num_experts_per_tok": 2})",
                                         "moe.json");
  Knobs knobs;
  knobs.persistence_threshold = 0;
  knobs.prefetch_elements = 0;
  knobs.max_live_elements = 1;  // nothing stays gathered past its use
  auto run = [&](Checkpointing c) {
    Experiment e{&model, 8, 3, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone,
                 Options(64, 1, Attention::kFlash, c)};
    absl::StatusOr<Measurement> m = RunExperiment(e, knobs);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.value_or(Measurement{}).sent_per_step;
  };
  const OpStats plain = run(Checkpointing::kNone);
  const OpStats full = run(Checkpointing::kFull);
  // Per layer the attention, the router and the 4 experts are gathered
  // again, less what the engine still holds from forward's last layer
  // (measured: 10 of 12); the attention alone would be at most 2.
  EXPECT_GE(full.calls, plain.calls + 2 * 4);
  EXPECT_GT(full.elements_sent, plain.elements_sent);
}

TEST(ActivationsTest, ModelsWithoutAShapeHaveNone) {
  const ModelSpec model = *Preset("deepseek-v3");
  EXPECT_FALSE(model.transformer.has_value());
  absl::StatusOr<StepScript> script = BuildStepScript(model, ActivationOptions{});
  ASSERT_TRUE(script.ok());
  EXPECT_TRUE(script->slot_bytes.empty());
}

TEST(ActivationsTest, ATensorLargerThanTheDeviceIsAnError) {
  const TransformerShape shape = *Preset("llama2-70b")->transformer;
  absl::StatusOr<SiteActivations> site =
      ActivationsOf(Site::kAttention, shape, Options(1 << 20, 4096, Attention::kEager,
                                                     Checkpointing::kNone));
  ASSERT_FALSE(site.ok());
  EXPECT_EQ(std::string(site.status().message()),
            "the activation 'scores' would take 5.765e+17 bytes, more than the simulated "
            "device's 2^50 (lower --seq or --micro_batch)");
}

// Every tensor a site creates is freed by the end of the step.
TEST(ActivationsTest, TheScriptFreesEverySlotOnce) {
  for (Checkpointing c : {Checkpointing::kNone, Checkpointing::kSelective, Checkpointing::kFull}) {
    const ModelSpec model = *Preset("gpt2-small");
    absl::StatusOr<StepScript> script =
        BuildStepScript(model, Options(128, 1, Attention::kEager, c));
    ASSERT_TRUE(script.ok());
    std::vector<int> allocs(script->slot_bytes.size()), frees(script->slot_bytes.size());
    for (const StepOp& op : script->ops) {
      if (op.kind == StepOp::Kind::kAlloc) ++allocs[op.arg];
      if (op.kind == StepOp::Kind::kFree) ++frees[op.arg];
    }
    for (size_t i = 0; i < allocs.size(); ++i) {
      ASSERT_EQ(allocs[i], 1) << i;
      ASSERT_EQ(frees[i], 1) << i;
    }
    EXPECT_EQ(script->layers, 12);
  }
}

// Forward frees a transient as soon as its consumer exists: within an eager
// attention site, no more than the site's kept tensors plus its largest
// transient (the raw scores) are ever live on top of what came before.
TEST(ActivationsTest, TransientsDieAsSoonAsTheirConsumerExists) {
  const ModelSpec model = *Preset("gpt2-small");
  const ActivationOptions o = Options(512, 1, Attention::kEager, Checkpointing::kNone);
  absl::StatusOr<StepScript> script = BuildStepScript(model, o);
  ASSERT_TRUE(script.ok());
  const SiteActivations site = ActivationsOf(Site::kAttention, *model.transformer, o).value();
  uint64_t kept = 0, largest_transient = 0;
  for (const ActTensor& t : site.tensors) {
    if (t.saved) kept += t.bytes;
    if (!t.saved) largest_transient = std::max(largest_transient, t.bytes);
  }
  uint64_t live = 0, at_start = 0, peak = 0;
  bool in_site = false;
  for (const StepOp& op : script->ops) {
    if (op.kind == StepOp::Kind::kAlloc) live += script->slot_bytes[op.arg];
    if (op.kind == StepOp::Kind::kFree) live -= script->slot_bytes[op.arg];
    if (op.kind == StepOp::Kind::kMark && op.arg == kLayer + 1) {
      in_site = true;
      at_start = live;
    }
    if (in_site && op.kind == StepOp::Kind::kRelease) break;
    if (in_site) peak = std::max(peak, live);
  }
  ASSERT_TRUE(in_site);
  EXPECT_LE(peak - at_start, kept + largest_transient);
  EXPECT_GE(peak - at_start, kept);
}

}  // namespace
}  // namespace zero::footprint
