#include "bench/footprint/presets.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace zero::footprint {
namespace {

struct GptShape {
  uint64_t layers, hidden, vocab = 50257, context = 1024;
};

ModelSpec Gpt(std::string name, const GptShape& s) {
  const uint64_t h = s.hidden;
  ModelBuilder b(std::move(name));
  b.Module("wte").Param("weight", {s.vocab, h});
  b.Module("wpe").Param("weight", {s.context, h});
  b.Use("wte").Use("wpe");
  for (uint64_t i = 0; i < s.layers; ++i) {
    const std::string layer = absl::StrCat("h.", i);
    b.Module(layer + ".attn")
        .Param("ln_1.weight", {h})
        .Param("ln_1.bias", {h})
        .Param("attn.c_attn.weight", {h, 3 * h})
        .Param("attn.c_attn.bias", {3 * h})
        .Param("attn.c_proj.weight", {h, h})
        .Param("attn.c_proj.bias", {h});
    b.Module(layer + ".mlp")
        .Param("ln_2.weight", {h})
        .Param("ln_2.bias", {h})
        .Param("mlp.c_fc.weight", {h, 4 * h})
        .Param("mlp.c_fc.bias", {4 * h})
        .Param("mlp.c_proj.weight", {4 * h, h})
        .Param("mlp.c_proj.bias", {h});
    b.Use(layer + ".attn").Use(layer + ".mlp");
  }
  b.Module("ln_f").Param("weight", {h}).Param("bias", {h});
  // The logits reuse the token embedding (tied weights).
  b.Use("ln_f").Use("wte");
  return std::move(b).Build();
}

struct LlamaShape {
  uint64_t layers, hidden, intermediate, heads, kv_heads, vocab = 32000;
};

ModelSpec Llama(std::string name, const LlamaShape& s) {
  const uint64_t h = s.hidden, kv = s.kv_heads * (h / s.heads), ff = s.intermediate;
  ModelBuilder b(std::move(name));
  b.Module("embed_tokens").Param("weight", {s.vocab, h});
  for (uint64_t i = 0; i < s.layers; ++i) {
    const std::string layer = absl::StrCat("layers.", i);
    b.Module(layer + ".attn")
        .Param("input_layernorm.weight", {h})
        .Param("self_attn.q_proj.weight", {h, h})
        .Param("self_attn.k_proj.weight", {kv, h})
        .Param("self_attn.v_proj.weight", {kv, h})
        .Param("self_attn.o_proj.weight", {h, h});
    b.Module(layer + ".mlp")
        .Param("post_attention_layernorm.weight", {h})
        .Param("mlp.gate_proj.weight", {ff, h})
        .Param("mlp.up_proj.weight", {ff, h})
        .Param("mlp.down_proj.weight", {h, ff});
  }
  b.Module("norm").Param("weight", {h});
  b.Module("lm_head").Param("weight", {s.vocab, h});
  return std::move(b).Build();
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
    {"gpt2-small", [] { return Gpt("gpt2-small", {.layers = 12, .hidden = 768}); }},
    {"gpt2-medium", [] { return Gpt("gpt2-medium", {.layers = 24, .hidden = 1024}); }},
    {"gpt2-large", [] { return Gpt("gpt2-large", {.layers = 36, .hidden = 1280}); }},
    {"gpt2-xl", [] { return Gpt("gpt2-xl", {.layers = 48, .hidden = 1600}); }},
    {"zero-1.5b", [] { return Gpt("zero-1.5b", {.layers = 48, .hidden = 1600}); }},
    {"zero-7.5b", [] { return Gpt("zero-7.5b", {.layers = 80, .hidden = 2768}); }},
    {"zero-100b", [] { return Gpt("zero-100b", {.layers = 125, .hidden = 8192}); }},
    {"llama2-7b",
     [] {
       return Llama(
           "llama2-7b",
           {.layers = 32, .hidden = 4096, .intermediate = 11008, .heads = 32, .kv_heads = 32});
     }},
    {"llama2-13b",
     [] {
       return Llama(
           "llama2-13b",
           {.layers = 40, .hidden = 5120, .intermediate = 13824, .heads = 40, .kv_heads = 40});
     }},
    {"llama2-70b",
     [] {
       return Llama(
           "llama2-70b",
           {.layers = 80, .hidden = 8192, .intermediate = 28672, .heads = 64, .kv_heads = 8});
     }},
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
