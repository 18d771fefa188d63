#include "footprint/hf_config.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "footprint/model_json.h"
#include "footprint/transformer.h"

namespace zero::footprint {
namespace {

using Kind = json::Value::Kind;

constexpr const char* kFamilies[] = {"gpt2",    "llama", "mistral", "qwen2",    "phi3",
                                     "gemma",   "mixtral", "qwen2_moe", "gpt_neox"};
constexpr uint64_t kMaxDimension = uint64_t{1} << 24;

// Reads the keys of one config; every error names the file, the position
// and the family.
class Reader {
 public:
  Reader(const json::Value& root, const std::string& file, std::string family)
      : root_(root), file_(file), family_(std::move(family)) {}

  absl::StatusOr<uint64_t> Count(const char* key) const {
    const json::Value* v = root_.Find(key);
    if (v == nullptr || v->kind == Kind::kNull) {
      return Error(root_.pos, absl::StrFormat("%s config has no \"%s\"", family_, key));
    }
    return CountOf(*v, key);
  }
  absl::StatusOr<uint64_t> Count(const char* key, uint64_t fallback) const {
    const json::Value* v = root_.Find(key);
    if (v == nullptr || v->kind == Kind::kNull) return fallback;
    return CountOf(*v, key);
  }
  absl::StatusOr<bool> Flag(const char* key, bool fallback) const {
    const json::Value* v = root_.Find(key);
    if (v == nullptr || v->kind == Kind::kNull) return fallback;
    if (v->kind != Kind::kBool) {
      return Error(v->pos, absl::StrFormat("\"%s\" must be true or false, found %s", key,
                                           json::KindName(v->kind)));
    }
    return v->boolean;
  }
  // A probability: whether it is above zero (dropout on).
  absl::StatusOr<bool> Positive(const char* key, double fallback) const {
    const json::Value* v = root_.Find(key);
    if (v == nullptr || v->kind == Kind::kNull) return fallback > 0;
    absl::StatusOr<double> p = json::AsDouble(*v, key);
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(file_, ":", p.status().message()));
    return *p > 0;
  }
  absl::StatusOr<std::string> Word(const char* key, const char* fallback) const {
    const json::Value* v = root_.Find(key);
    if (v == nullptr || v->kind == Kind::kNull) return std::string(fallback);
    if (v->kind != Kind::kString) {
      return Error(v->pos, absl::StrFormat("\"%s\" must be a string, found %s", key,
                                           json::KindName(v->kind)));
    }
    return v->text;
  }
  // A count that null (or absence) turns off: 0.
  absl::StatusOr<uint64_t> CountOrNone(const char* key, uint64_t fallback) const {
    const json::Value* v = root_.Find(key);
    if (v != nullptr && v->kind == Kind::kNull) return 0;
    return Count(key, fallback);
  }
  absl::Status Error(json::Pos pos, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d:%d: %s", file_, pos.line, pos.column, what));
  }
  absl::Status Error(const std::string& what) const { return Error(root_.pos, what); }
  // Whether `key` holds a non-empty list.
  bool NonEmptyList(const char* key) const {
    const json::Value* v = root_.Find(key);
    return v != nullptr && v->kind == Kind::kArray && !v->items.empty();
  }

 private:
  absl::StatusOr<uint64_t> CountOf(const json::Value& v, const char* key) const {
    std::optional<uint64_t> n = v.AsUint();
    if (!n.has_value() || *n < 1 || *n > kMaxDimension) {
      return Error(v.pos, absl::StrFormat("\"%s\" must be an integer from 1 to %d, found %s", key,
                                          kMaxDimension,
                                          v.kind == Kind::kNumber ? v.text
                                                                  : std::string(json::KindName(v.kind))));
    }
    return *n;
  }

  const json::Value& root_;
  const std::string& file_;
  const std::string family_;
};

// ACT2FN's names for the activations --kernels=transformers models; any
// other is kOther (the fused accounting does not read it).
HiddenAct ActOf(const std::string& name) {
  if (name == "silu" || name == "swish") return HiddenAct::kSilu;
  if (name == "gelu" || name == "gelu_pytorch_tanh") return HiddenAct::kGelu;
  if (name == "gelu_new") return HiddenAct::kGeluNew;
  if (name == "quick_gelu") return HiddenAct::kQuickGelu;
  if (name == "relu") return HiddenAct::kRelu;
  return HiddenAct::kOther;
}

Family FamilyOf(const std::string& type) {
  static constexpr std::pair<const char*, Family> kByName[] = {
      {"gpt2", Family::kGpt2},       {"llama", Family::kLlama},
      {"mistral", Family::kMistral}, {"qwen2", Family::kQwen2},
      {"phi3", Family::kPhi3},       {"gemma", Family::kGemma},
      {"mixtral", Family::kMixtral}, {"qwen2_moe", Family::kQwen2Moe},
      {"gpt_neox", Family::kGptNeox}};
  for (const auto& [name, family] : kByName) {
    if (type == name) return family;
  }
  return Family::kLlama;
}

absl::StatusOr<TransformerShape> Gpt2(const Reader& r) {
  TransformerShape s;
  ASSIGN_OR_RETURN(s.hidden, r.Count("n_embd"));
  ASSIGN_OR_RETURN(s.layers, r.Count("n_layer"));
  ASSIGN_OR_RETURN(s.heads, r.Count("n_head"));
  ASSIGN_OR_RETURN(s.vocab, r.Count("vocab_size"));
  ASSIGN_OR_RETURN(s.positions, r.Count("n_positions", 1024));
  ASSIGN_OR_RETURN(s.intermediate, r.Count("n_inner", 4 * s.hidden));
  ASSIGN_OR_RETURN(const bool attn_dropout, r.Positive("attn_pdrop", 0.1));
  ASSIGN_OR_RETURN(const bool resid_dropout, r.Positive("resid_pdrop", 0.1));
  ASSIGN_OR_RETURN(s.embedding_dropout, r.Positive("embd_pdrop", 0.1));
  ASSIGN_OR_RETURN(const std::string act, r.Word("activation_function", "gelu_new"));
  s.act = ActOf(act);
  s.attention_dropout = attn_dropout;
  s.residual_dropout = resid_dropout;
  s.kv_heads = s.heads;
  s.head_dim = s.hidden / s.heads;
  s.norm = NormKind::kLayerNorm;
  s.norm_bias = s.qkv_bias = s.out_bias = s.mlp_bias = true;
  s.mlp = MlpKind::kPlain;
  s.fused_qkv = true;
  s.tied_embeddings = true;
  s.dropout = attn_dropout || resid_dropout;
  s.family = Family::kGpt2;
  return s;
}

// The keys every family but GPT-2 names alike.
absl::Status Common(const Reader& r, TransformerShape& s, bool tied_default) {
  ASSIGN_OR_RETURN(s.hidden, r.Count("hidden_size"));
  ASSIGN_OR_RETURN(s.layers, r.Count("num_hidden_layers"));
  ASSIGN_OR_RETURN(s.heads, r.Count("num_attention_heads"));
  ASSIGN_OR_RETURN(s.intermediate, r.Count("intermediate_size"));
  ASSIGN_OR_RETURN(s.vocab, r.Count("vocab_size"));
  ASSIGN_OR_RETURN(s.kv_heads, r.Count("num_key_value_heads", s.heads));
  ASSIGN_OR_RETURN(s.head_dim, r.Count("head_dim", s.hidden / s.heads));
  ASSIGN_OR_RETURN(s.tied_embeddings, r.Flag("tie_word_embeddings", tied_default));
  const bool gelu = s.family == Family::kGptNeox || s.family == Family::kGemma;
  ASSIGN_OR_RETURN(const std::string act, r.Word("hidden_act", gelu ? "gelu" : "silu"));
  s.act = ActOf(act);
  ASSIGN_OR_RETURN(s.attention_dropout, r.Positive("attention_dropout", 0));
  return absl::OkStatus();
}

// The keys only --kernels=transformers reads: sub-layer and embedding
// dropout, the sliding window (transformers' default per family; Qwen2's
// only with use_sliding_window, and then not per layer as
// max_window_layers says: every layer), Qwen2-MoE's norm_topk_prob.
absl::Status TransformersKeys(const Reader& r, TransformerShape& s) {
  const Family f = s.family;
  if (f == Family::kPhi3) {
    ASSIGN_OR_RETURN(s.residual_dropout, r.Positive("resid_pdrop", 0));
  } else if (f == Family::kGptNeox) {
    ASSIGN_OR_RETURN(s.residual_dropout, r.Positive("hidden_dropout", 0));
    s.embedding_dropout = s.residual_dropout;
  }
  if (f == Family::kPhi3 || f == Family::kMistral || f == Family::kMixtral) {
    ASSIGN_OR_RETURN(s.sliding_window,
                     r.CountOrNone("sliding_window", f == Family::kMistral ? 4096 : 0));
  }
  if (f == Family::kQwen2 || f == Family::kQwen2Moe) {
    ASSIGN_OR_RETURN(const bool windowed, r.Flag("use_sliding_window", false));
    if (windowed) {
      ASSIGN_OR_RETURN(s.sliding_window, r.CountOrNone("sliding_window", 4096));
    }
  }
  if (f == Family::kQwen2Moe) {
    ASSIGN_OR_RETURN(s.norm_topk, r.Flag("norm_topk_prob", false));
  }
  return absl::OkStatus();
}

absl::StatusOr<TransformerShape> LlamaLike(const Reader& r, const std::string& family) {
  TransformerShape s;
  s.family = FamilyOf(family);
  RETURN_IF_ERROR(Common(r, s, family == "gemma"));
  RETURN_IF_ERROR(TransformersKeys(r, s));
  ASSIGN_OR_RETURN(s.qkv_bias, r.Flag("attention_bias", family == "qwen2" || family == "qwen2_moe"));
  if (family == "qwen2" || family == "qwen2_moe") {
    s.out_bias = false;  // Qwen2: biases on q, k and v only
  } else {
    s.out_bias = s.qkv_bias;
  }
  ASSIGN_OR_RETURN(s.mlp_bias, r.Flag("mlp_bias", false));
  s.fused_qkv = s.fused_gate_up = family == "phi3";
  if (family == "mixtral") {
    ASSIGN_OR_RETURN(s.experts, r.Count("num_local_experts"));
    ASSIGN_OR_RETURN(s.top_k, r.Count("num_experts_per_tok"));
    s.expert_intermediate = s.intermediate;
  }
  if (family == "qwen2_moe") {
    ASSIGN_OR_RETURN(s.experts, r.Count("num_experts"));
    ASSIGN_OR_RETURN(s.top_k, r.Count("num_experts_per_tok"));
    ASSIGN_OR_RETURN(s.expert_intermediate, r.Count("moe_intermediate_size"));
    ASSIGN_OR_RETURN(s.shared_intermediate, r.Count("shared_expert_intermediate_size"));
    ASSIGN_OR_RETURN(const uint64_t step, r.Count("decoder_sparse_step", 1));
    if (step != 1 || r.NonEmptyList("mlp_only_layers")) {
      return r.Error(
          "qwen2_moe with dense layers (decoder_sparse_step, mlp_only_layers) is not supported");
    }
  }
  if (s.experts > 0 && s.top_k > s.experts) {
    return r.Error(absl::StrFormat("num_experts_per_tok %d is more than the %d experts",
                                       s.top_k, s.experts));
  }
  return s;
}

absl::StatusOr<TransformerShape> GptNeox(const Reader& r) {
  TransformerShape s;
  s.family = Family::kGptNeox;
  RETURN_IF_ERROR(Common(r, s, false));
  RETURN_IF_ERROR(TransformersKeys(r, s));
  s.kv_heads = s.heads;
  s.head_dim = s.hidden / s.heads;
  ASSIGN_OR_RETURN(s.parallel_residual, r.Flag("use_parallel_residual", true));
  ASSIGN_OR_RETURN(s.qkv_bias, r.Flag("attention_bias", true));
  s.out_bias = s.qkv_bias;
  s.mlp_bias = true;
  s.norm = NormKind::kLayerNorm;
  s.norm_bias = true;
  s.mlp = MlpKind::kPlain;
  s.fused_qkv = true;
  return s;
}

// "DIR/config.json" is DIR's model; other files are their own name.
std::string NameOf(const std::string& file) {
  std::string name = file;
  if (absl::EndsWith(name, "/config.json")) name.resize(name.size() - 12);
  if (const size_t slash = name.rfind('/'); slash != std::string::npos) name.erase(0, slash + 1);
  return name.empty() ? file : name;
}

}  // namespace

bool IsHfConfig(const json::Value& root) {
  return root.kind == Kind::kObject && root.Find("model_type") != nullptr;
}

absl::StatusOr<ModelSpec> ModelFromHfConfig(const json::Value& root, const std::string& file) {
  const json::Value& type = *root.Find("model_type");
  const std::string family = type.kind == Kind::kString ? type.text : "";
  const Reader r(root, file, family);
  if (std::find(std::begin(kFamilies), std::end(kFamilies), family) == std::end(kFamilies)) {
    return r.Error(type.pos, absl::StrFormat("model_type %s is not supported (supported: %s)",
                                             type.kind == Kind::kString ? "'" + family + "'"
                                                                        : std::string(json::KindName(type.kind)),
                                             absl::StrJoin(kFamilies, ", ")));
  }
  absl::StatusOr<TransformerShape> shape = family == "gpt2"       ? Gpt2(r)
                                           : family == "gpt_neox" ? GptNeox(r)
                                                                  : LlamaLike(r, family);
  if (!shape.ok()) return shape.status();
  if (shape->heads % shape->kv_heads != 0) {
    return r.Error(absl::StrFormat("%d attention heads are not a multiple of %d KV heads",
                                             shape->heads, shape->kv_heads));
  }
  if (shape->head_dim == 0) {
    return r.Error(absl::StrFormat("the hidden size %d is smaller than its %d attention heads",
                                   shape->hidden, shape->heads));
  }
  // The limits of a module-list file, checked before the model is built (a
  // million layers took gigabytes first): at most a dozen modules a layer
  // besides its experts.
  if (shape->layers * (shape->experts + 12) > kMaxModelModules) {
    return r.Error(absl::StrFormat("%d layers%s make more than %d modules", shape->layers,
                                   shape->moe() ? absl::StrFormat(" of %d experts", shape->experts)
                                                : std::string(),
                                   kMaxModelModules));
  }
  ModelSpec model = BuildTransformer(NameOf(file), *shape, family == "gpt2");
  // As a module-list file is: its sizes (at most 2^58 parameters) checked.
  if (absl::Status valid = Validate(model); !valid.ok()) return r.Error(std::string(valid.message()));
  return model;
}

}  // namespace zero::footprint
