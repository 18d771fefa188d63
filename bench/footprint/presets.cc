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
