#include "footprint/presets.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "footprint/transformer.h"

namespace zero::footprint {

TransformerShape GptShape(uint64_t layers, uint64_t hidden, uint64_t heads) {
  return {.layers = layers,
          .hidden = hidden,
          .heads = heads,
          .kv_heads = heads,
          .head_dim = hidden / heads,
          .intermediate = 4 * hidden,
          .vocab = 50257,
          .positions = 1024,
          .norm = NormKind::kLayerNorm,
          .norm_bias = true,
          .mlp = MlpKind::kPlain,
          .qkv_bias = true,
          .out_bias = true,
          .mlp_bias = true,
          .fused_qkv = true,
          .tied_embeddings = true,
          .dropout = true,
          .family = Family::kGpt2,
          .act = HiddenAct::kGeluNew,  // GPT-2's activation_function
          .attention_dropout = true,   // attn_pdrop, resid_pdrop, embd_pdrop 0.1
          .residual_dropout = true,
          .embedding_dropout = true};
}

namespace {

// Llama: RMSNorm, SwiGLU, rotary positions, no biases, untied head.
TransformerShape Llama(uint64_t layers, uint64_t hidden, uint64_t intermediate, uint64_t heads,
                       uint64_t kv_heads, uint64_t vocab) {
  return {.layers = layers,
          .hidden = hidden,
          .heads = heads,
          .kv_heads = kv_heads,
          .head_dim = hidden / heads,
          .intermediate = intermediate,
          .vocab = vocab};
}

// Mixtral 8x7B: Mistral 7B's attention, every MLP replaced by 8 SwiGLU
// experts of 14336, two per token.
TransformerShape Mixtral() {
  TransformerShape s = Llama(32, 4096, 14336, 32, 8, 32000);
  s.experts = 8;
  s.top_k = 2;
  s.expert_intermediate = 14336;
  s.family = Family::kMixtral;
  return s;
}

// DeepSeek-V3's shape (its Hugging Face config.json and the report, arXiv
// 2412.19437): 61 layers of hidden 7168, vocab 129280, untied head; the
// first 3 layers dense (SwiGLU 18432), the other 58 mixture-of-experts
// layers with a router over 256 routed experts and 1 shared expert, each a
// SwiGLU of 2048. Attention is MLA (128 heads; queries through a rank-1536
// and keys/values through a rank-512 compression, 128 + 64 rope dims per
// query/key head, 128 per value head), with its two low-rank norms. The
// multi-token-prediction module (14B) is left out, as in the published
// 671B. Modules: one per attention sub-layer, per dense MLP, per router
// (with the MLP's norm) and per expert projection, as DeepSpeed fetches
// leaf modules: 44,843 in all. Approximated: every expert is used once per
// step (a large batch routes tokens to all of them).
ModelSpec DeepSeekV3() {
  const uint64_t h = 7168, heads = 128, q_rank = 1536, kv_rank = 512, rope = 64, nope = 128,
                 v = 128, vocab = 129280, dense_ff = 18432, expert_ff = 2048, experts = 256;
  ModelBuilder b("deepseek-v3");
  b.Module("embed_tokens").Param("weight", {vocab, h});
  auto swiglu = [&](const std::string& name, uint64_t ff) {
    b.Module(name + ".gate_proj").Param("weight", {ff, h});
    b.Module(name + ".up_proj").Param("weight", {ff, h});
    b.Module(name + ".down_proj").Param("weight", {h, ff});
  };
  for (uint64_t i = 0; i < 61; ++i) {
    const std::string layer = absl::StrCat("layers.", i);
    b.Module(layer + ".attn")
        .Param("input_layernorm.weight", {h})
        .Param("self_attn.q_a_proj.weight", {q_rank, h})
        .Param("self_attn.q_a_layernorm.weight", {q_rank})
        .Param("self_attn.q_b_proj.weight", {heads * (nope + rope), q_rank})
        .Param("self_attn.kv_a_proj_with_mqa.weight", {kv_rank + rope, h})
        .Param("self_attn.kv_a_layernorm.weight", {kv_rank})
        .Param("self_attn.kv_b_proj.weight", {heads * (nope + v), kv_rank})
        .Param("self_attn.o_proj.weight", {h, heads * v});
    if (i < 3) {
      b.Module(layer + ".mlp")
          .Param("post_attention_layernorm.weight", {h})
          .Param("mlp.gate_proj.weight", {dense_ff, h})
          .Param("mlp.up_proj.weight", {dense_ff, h})
          .Param("mlp.down_proj.weight", {h, dense_ff});
      continue;
    }
    b.Module(layer + ".mlp.gate")
        .Param("post_attention_layernorm.weight", {h})
        .Param("weight", {experts, h})
        .Param("e_score_correction_bias", {experts});
    swiglu(layer + ".mlp.shared_experts", expert_ff);
    for (uint64_t e = 0; e < experts; ++e) swiglu(absl::StrCat(layer, ".mlp.experts.", e), expert_ff);
  }
  b.Module("norm").Param("weight", {h});
  b.Module("lm_head").Param("weight", {vocab, h});
  return std::move(b).Build();
}

struct Entry {
  const char* name;
  ModelSpec (*make)();
};

constexpr Entry kPresets[] = {
    {"gpt2-small", [] { return BuildTransformer("gpt2-small", GptShape(12, 768, 12), true); }},
    {"gpt2-medium", [] { return BuildTransformer("gpt2-medium", GptShape(24, 1024, 16), true); }},
    {"gpt2-large", [] { return BuildTransformer("gpt2-large", GptShape(36, 1280, 20), true); }},
    {"gpt2-xl", [] { return BuildTransformer("gpt2-xl", GptShape(48, 1600, 25), true); }},
    {"zero-1.5b", [] { return BuildTransformer("zero-1.5b", GptShape(48, 1600, 25), true); }},
    {"zero-7.5b", [] { return BuildTransformer("zero-7.5b", GptShape(80, 2768, 16), true); }},
    {"zero-100b", [] { return BuildTransformer("zero-100b", GptShape(125, 8192, 64), true); }},
    {"llama2-7b",
     [] { return BuildTransformer("llama2-7b", Llama(32, 4096, 11008, 32, 32, 32000)); }},
    {"llama2-13b",
     [] { return BuildTransformer("llama2-13b", Llama(40, 5120, 13824, 40, 40, 32000)); }},
    {"llama2-70b",
     [] { return BuildTransformer("llama2-70b", Llama(80, 8192, 28672, 64, 8, 32000)); }},
    {"llama3-8b",
     [] { return BuildTransformer("llama3-8b", Llama(32, 4096, 14336, 32, 8, 128256)); }},
    {"llama3-70b",
     [] { return BuildTransformer("llama3-70b", Llama(80, 8192, 28672, 64, 8, 128256)); }},
    {"mixtral-8x7b", [] { return BuildTransformer("mixtral-8x7b", Mixtral()); }},
    {"deepseek-v3", DeepSeekV3},
};

}  // namespace

std::optional<ModelSpec> Preset(std::string_view name) {
  for (const Entry& e : kPresets) {
    if (name == e.name) return e.make();
  }
  return std::nullopt;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const Entry& e : kPresets) names.emplace_back(e.name);
  return names;
}

}  // namespace zero::footprint
