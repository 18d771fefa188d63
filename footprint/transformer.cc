#include "footprint/transformer.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace zero::footprint {
namespace {

struct Names {
  const char* embed;
  const char* layers;
  const char* final_norm;
  const char* attn;  // parameter prefixes inside the sub-layer modules
  const char* mlp;
  const char* norm1;
  const char* norm2;
};

constexpr Names kGpt2Names = {"wte", "h", "ln_f", "attn.", "mlp.", "ln_1", "ln_2"};
constexpr Names kLlamaNames = {"embed_tokens",  "layers",    "norm",
                               "self_attn.",    "mlp.",      "input_layernorm",
                               "post_attention_layernorm"};

class Builder {
 public:
  Builder(std::string name, const TransformerShape& s, bool gpt2)
      : b_(std::move(name)), s_(s), n_(gpt2 ? kGpt2Names : kLlamaNames), gpt2_(gpt2) {}

  ModelSpec Build() && {
    b_.Shape(s_);
    b_.Module(n_.embed).Param("weight", {s_.vocab, s_.hidden});
    b_.Use(n_.embed, Site::kEmbedding);
    if (s_.positions > 0) {
      b_.Module("wpe").Param("weight", {s_.positions, s_.hidden});
      b_.Use("wpe");
    }
    for (uint64_t i = 0; i < s_.layers; ++i) Layer(absl::StrCat(n_.layers, ".", i));
    Norm(b_.Module(n_.final_norm), "");
    b_.Use(n_.final_norm);
    if (s_.tied_embeddings) {
      b_.Use(n_.embed, Site::kHead);
    } else {
      b_.Module("lm_head").Param("weight", {s_.vocab, s_.hidden});
      b_.Use("lm_head", Site::kHead);
    }
    return std::move(b_).Build();
  }

 private:
  // A norm's parameters, named `prefix` + "weight" (and "bias").
  void Norm(ModelBuilder& m, const std::string& name) {
    const std::string prefix = name.empty() ? "" : name + ".";
    m.Param(prefix + "weight", {s_.hidden});
    if (s_.norm_bias) m.Param(prefix + "bias", {s_.hidden});
  }

  // A projection from `in` to `out` features, with a bias when `bias`.
  void Linear(ModelBuilder& m, const std::string& name, uint64_t in, uint64_t out, bool bias) {
    // GPT-2's Conv1D stores its weight transposed.
    if (gpt2_) {
      m.Param(name + ".weight", {in, out});
    } else {
      m.Param(name + ".weight", {out, in});
    }
    if (bias) m.Param(name + ".bias", {out});
  }

  void Layer(const std::string& layer) {
    const std::string attn = layer + ".attn";
    ModelBuilder& a = b_.Module(attn);
    Norm(a, n_.norm1);
    const std::string p = n_.attn;
    const uint64_t h = s_.hidden, q = s_.q_width(), kv = s_.kv_width();
    if (gpt2_) {
      Linear(a, p + "c_attn", h, q + 2 * kv, s_.qkv_bias);
      Linear(a, p + "c_proj", q, h, s_.out_bias);
    } else {
      if (s_.fused_qkv) {
        Linear(a, p + "qkv_proj", h, q + 2 * kv, s_.qkv_bias);
      } else {
        Linear(a, p + "q_proj", h, q, s_.qkv_bias);
        Linear(a, p + "k_proj", h, kv, s_.qkv_bias);
        Linear(a, p + "v_proj", h, kv, s_.qkv_bias);
      }
      Linear(a, p + "o_proj", q, h, s_.out_bias);
    }
    b_.Use(attn, Site::kAttention);
    if (s_.moe()) {
      Experts(layer + ".moe");
    } else {
      ModelBuilder& m = b_.Module(layer + ".mlp");
      Norm(m, n_.norm2);
      Mlp(m, std::string(n_.mlp), s_.intermediate, s_.mlp_bias);
      b_.Use(layer + ".mlp", Site::kMlp);
    }
  }

  void Mlp(ModelBuilder& m, const std::string& prefix, uint64_t ff, bool bias) {
    const uint64_t h = s_.hidden;
    if (s_.mlp == MlpKind::kPlain) {
      Linear(m, prefix + (gpt2_ ? "c_fc" : "up_proj"), h, ff, bias);
      Linear(m, prefix + (gpt2_ ? "c_proj" : "down_proj"), ff, h, bias);
      return;
    }
    if (s_.fused_gate_up) {
      Linear(m, prefix + "gate_up_proj", h, 2 * ff, bias);
    } else {
      Linear(m, prefix + "gate_proj", h, ff, bias);
      Linear(m, prefix + "up_proj", h, ff, bias);
    }
    Linear(m, prefix + "down_proj", ff, h, bias);
  }

  // The router (with the sub-layer's norm) carries the site: its use
  // stands for the whole mixture's activations.
  void Experts(const std::string& moe) {
    ModelBuilder& gate = b_.Module(moe + ".gate");
    Norm(gate, n_.norm2);
    Linear(gate, "router", s_.hidden, s_.experts, false);
    b_.Use(moe + ".gate", Site::kMlp);
    for (uint64_t e = 0; e < s_.experts; ++e) {
      const std::string expert = absl::StrCat(moe, ".experts.", e);
      Mlp(b_.Module(expert), "", s_.expert_intermediate, false);
      b_.Use(expert, Site::kExpert);
    }
    if (s_.shared_intermediate > 0) {
      ModelBuilder& shared = b_.Module(moe + ".shared_expert");
      Mlp(shared, "", s_.shared_intermediate, false);
      Linear(shared, "shared_expert_gate", s_.hidden, 1, false);
      b_.Use(moe + ".shared_expert", Site::kExpert);
    }
  }

  ModelBuilder b_;
  const TransformerShape s_;
  const Names n_;
  const bool gpt2_;
};

}  // namespace

ModelSpec BuildTransformer(std::string name, const TransformerShape& shape, bool gpt2_names) {
  return Builder(std::move(name), shape, gpt2_names).Build();
}

}  // namespace zero::footprint
