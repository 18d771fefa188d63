#include "footprint/activations_hf.h"

#include <string>

#include "footprint/site_builder.h"

namespace zero::footprint {
namespace {

// One micro-batch through one family's transformers code.
struct Hf : Dims {
  Hf(const TransformerShape& s, const ActivationOptions& o) : Dims(s, o) {}

  // An fp32 model: .float() and .to(dtype) copy nothing.
  bool Wide() const { return o.element_bytes == 4; }
  bool Cpu() const { return o.backend == Backend::kCpu; }
  // Dropout's mask: bool on a card, the model's dtype on the CPU.
  double Mask(double elements) const { return elements * (Cpu() ? b : 1); }
  // LayerNorm's mean or rstd: fp32 on a card, the model's dtype on the CPU.
  double Statistic() const { return tokens * (Cpu() ? b : 4); }
  bool LayerNorm() const { return s.norm == NormKind::kLayerNorm; }
  // Whether a norm keeps the tensor it reads: LayerNorm does; RMSNorm's
  // x.float() is that tensor only in an fp32 model.
  bool NormKeepsInput() const { return LayerNorm() || Wide(); }
  // Attention probabilities: heads x seq x tokens elements.
  double Scores() const { return double(s.heads) * double(o.seq) * tokens; }
  bool Grouped() const { return s.kv_heads < s.heads; }
  // Phi-3 and GPT-NeoX rotate with torch.cat: q and k come out in (batch,
  // heads, seq, dim) order, not as views of the projection's layout.
  bool RopeCat() const {
    return s.positions == 0 && (s.family == Family::kPhi3 || s.family == Family::kGptNeox);
  }
  // sdpa gets a mask when the sliding window is shorter than the sequence
  // (transformers skips it otherwise, for the flash kernel's is_causal).
  bool SdpaMask() const {
    return o.attention == Attention::kSdpa && s.sliding_window > 0 && o.seq >= s.sliding_window;
  }
  // On the CPU, sdpa with dropout falls back to the math path (in fp32).
  bool MathSdpa() const {
    return o.attention == Attention::kSdpa && Cpu() && s.attention_dropout;
  }
};

// A norm of the site's input (which the site made, kept when
// NormKeepsInput): its statistics and its output (the projections' input).
void Norm(SiteBuilder& site, const Hf& d, const std::string& name) {
  const double h = d.Hidden(), wide = d.Fp32(double(d.s.hidden));
  if (d.LayerNorm()) {
    site.Saved(name + ".mean", d.Statistic(), false);
    site.Saved(name + ".rstd", d.Statistic(), false);
    site.Saved(name + ".out", h);
    return;
  }
  if (!d.Wide()) site.Saved(name + ".input.fp32", wide);  // pow and the product with rstd keep it
  site.Saved(name + ".rstd", d.Fp32(1), false);
  if (d.s.family == Family::kGemma) {
    // (x * rstd) * (1 + w) in fp32, then cast: keeps x * rstd and 1 + w.
    site.Saved(name + ".normed.fp32", wide);
    site.Saved(name + ".one_plus_weight", double(d.s.hidden) * 4, false);
    const int out = d.Wide() ? -1 : site.Transient(name + ".out.fp32", wide);
    site.Saved(name + ".out", h);
    site.Drop(out);
    return;
  }
  // w * (x * rstd).to(dtype): the product keeps the cast for w's gradient.
  const int normed = d.Wide() ? -1 : site.Transient(name + ".normed.fp32", wide);
  site.Saved(name + ".normed", h);
  site.Drop(normed);
  site.Saved(name + ".out", h);
}

// How the attention reads q, k and v: as they were made (a view: the
// tensor, or the fused projection it is part of, stays), or through a copy
// it keeps instead (eager's matrix products, repeated heads, fp32 math).
struct Reads {
  bool q, k, v;
};

Reads ReadsOf(const Hf& d) {
  if (d.MathSdpa()) return {false, false, false};
  if (d.o.attention == Attention::kEager) {
    // matmul folds (batch, heads) into one dimension: a view only for a
    // single sequence or a tensor already in (batch, heads) order.
    const bool fold = d.o.micro_batch == 1;
    return {fold || d.RopeCat(), !d.Grouped() && (fold || d.RopeCat()), !d.Grouped() && fold};
  }
  // sdpa enables grouped-query attention without a mask and for
  // head_dim <= 256, else repeats k and v; flash-attn groups itself.
  const bool repeat = d.o.attention == Attention::kSdpa && d.Grouped() &&
                      (d.SdpaMask() || d.s.head_dim > 256);
  return {true, !repeat, !repeat};
}

// q, k and v, made and read as `r` says. Rotary positions make new q and k.
void QueryKeyValue(SiteBuilder& site, const Hf& d, const Reads& r) {
  const TransformerShape& s = d.s;
  const double q = d.Act(double(s.q_width())), kv = d.Act(double(s.kv_width()));
  const bool rotary = s.positions == 0;
  const bool fused_kept = s.fused_qkv && ((!rotary && (r.q || r.k)) || r.v);
  const int qkv = s.fused_qkv ? site.Maybe(fused_kept, "qkv", q + 2 * kv) : -1;
  const int q_proj = s.fused_qkv ? -1 : site.Maybe(!rotary && r.q, "q", q);
  const int k_proj = s.fused_qkv ? -1 : site.Maybe(!rotary && r.k, "k", kv);
  const int v_proj = s.fused_qkv ? -1 : site.Maybe(r.v, "v", kv);
  int q_made = q_proj, k_made = k_proj;
  if (rotary) {
    q_made = site.Maybe(r.q, "q.rotary", q);
    site.Drop(q_proj);
    k_made = site.Maybe(r.k, "k.rotary", kv);
    site.Drop(k_proj);
  }
  // The copies the attention keeps instead, all at the queries' width
  // (grouped k and v repeated to every head): eager's and sdpa's in the
  // model's dtype, the math path's in fp32.
  const double copy = d.MathSdpa() ? d.Fp32(double(s.q_width())) : q;
  const bool repeated = d.Grouped() && !d.MathSdpa();
  if (!r.q) {
    site.Saved("q.copy", copy);
    site.Drop(q_made);
  }
  if (!r.k) {
    site.Saved(repeated ? "k.repeated" : "k.copy", copy);
    site.Drop(k_made);
  }
  if (!r.v) {
    site.Saved(repeated ? "v.repeated" : "v.copy", copy);
    site.Drop(v_proj);
  }
  site.Drop(qkv);
}

// eager_attention_forward: scores, softmax (fp32 but GPT-2's), its cast,
// dropout, the product with v and the merged heads.
void EagerCore(SiteBuilder& site, const Hf& d) {
  const double scores = d.Scores(), q = d.Act(double(d.s.q_width()));
  const bool dropout = d.s.attention_dropout;
  const int raw = site.Transient("scores", scores * d.b);
  int probs = -1;
  if (d.s.family != Family::kGpt2 && !d.Wide()) {
    site.Saved("probs.fp32", scores * 4);
    site.Drop(raw);
    probs = site.Maybe(!dropout, "probs", scores * d.b);  // the product with v keeps it
  } else {
    probs = site.Saved("probs", scores * d.b);
    site.Drop(raw);
  }
  if (dropout) {
    site.Saved("probs.dropout_mask", d.Mask(scores), false);
    site.Saved("probs.dropped", scores * d.b);
    site.Drop(probs);
  }
  const int context = site.Transient("context", q);
  site.Saved("context.merged", q);  // transpose(1, 2).contiguous(): the output projection's input
  site.Drop(context);
}

// The math path (sdpa with dropout on the CPU): fp32 throughout.
void MathCore(SiteBuilder& site, const Hf& d) {
  const double scores = d.Scores();
  const int raw = site.Transient("scores.fp32", scores * 4);
  site.Saved("probs.fp32", scores * 4);
  site.Drop(raw);
  site.Saved("probs.dropout_mask", scores * 4, false);
  site.Saved("probs.dropped", scores * 4);
  const int context = site.Transient("context.fp32", d.Fp32(double(d.s.q_width())));
  site.Saved("context.merged", d.Act(double(d.s.q_width())));
  site.Drop(context);
}

// sdpa's flash, memory-efficient or cuDNN kernel, or flash-attn: the
// output (laid out as q is) and the fp32 log-sum-exp.
void KernelCore(SiteBuilder& site, const Hf& d) {
  const double q = d.Act(double(d.s.q_width()));
  if (d.SdpaMask()) {
    // The boolean mask, made additive in the model's dtype by every call.
    site.Saved("attention.mask", double(d.o.micro_batch) * double(d.o.seq) * double(d.o.seq) * d.b,
               false);
  }
  site.Saved("attention.out", q);
  site.Saved("attention.lse", d.tokens * double(d.s.heads) * 4, false);
  if (d.RopeCat()) site.Saved("attention.merged", q);  // (batch, heads) order: a copy
}

// The sub-layer's output projection and, with dropout, its mask (the
// residual sum is the next site's input).
void Residual(SiteBuilder& site, const Hf& d, const std::string& prefix) {
  const int out = site.Transient(prefix + ".out", d.Hidden());
  if (!d.s.residual_dropout) return;
  site.Saved(prefix + ".dropout_mask", d.Mask(d.tokens * double(d.s.hidden)), false);
  site.Transient(prefix + ".dropped", d.Hidden());
  site.Drop(out);
}

void AttentionSite(SiteBuilder& site, const Hf& d) {
  site.Maybe(d.NormKeepsInput(), "input", d.Hidden());  // tensor 0: full checkpointing keeps it
  Norm(site, d, "attn_norm");
  QueryKeyValue(site, d, ReadsOf(d));
  if (d.o.attention == Attention::kEager) {
    EagerCore(site, d);
  } else if (d.MathSdpa()) {
    MathCore(site, d);
  } else {
    KernelCore(site, d);
  }
  Residual(site, d, "o_proj");
}

// What the activation keeps beyond its input and output, in T x f tensors.
int ActivationExtras(HiddenAct act) {
  switch (act) {
    case HiddenAct::kGeluNew: return 3;    // tanh, 1 + tanh, x / 2
    case HiddenAct::kQuickGelu: return 1;  // sigmoid(1.702 x)
    default: return 0;
  }
}

// An MLP's interior over `tokens` tokens of width `ff`: gated (gate and
// up, one fused tensor when `fused`) or plain (up), the activation's
// input (relu keeps its output instead) and extras, its output and, gated,
// the product (the down projection's input).
void MlpInterior(SiteBuilder& site, const Hf& d, const std::string& prefix, double tokens,
                 uint64_t ff, bool fused) {
  const double f = tokens * double(ff) * d.b;
  const bool input_kept = d.s.act != HiddenAct::kRelu;
  int gate = -1;
  if (d.s.mlp == MlpKind::kPlain) {
    gate = site.Maybe(input_kept, prefix + "up.out", f);
  } else if (fused) {
    site.Saved(prefix + "gate_up", 2 * f);  // the product keeps up, a view of it
  } else {
    gate = site.Maybe(input_kept, prefix + "gate", f);
    site.Saved(prefix + "up", f);
  }
  for (int i = 0; i < ActivationExtras(d.s.act); ++i) {
    site.Saved(prefix + "act.intermediate" + std::to_string(i), f);
  }
  site.Saved(prefix + "act", f);
  site.Drop(gate);
  if (d.s.mlp == MlpKind::kGated) site.Saved(prefix + "product", f);
}

// transformers' grouped_mm experts: top_k x T routed rows whatever the
// routing, sorted by expert.
void ExpertsSite(SiteBuilder& site, const Hf& d) {
  const TransformerShape& s = d.s;
  const double routed = d.tokens * double(s.top_k), e = double(s.experts);
  if (s.shared_intermediate > 0) {
    MlpInterior(site, d, "shared.", d.tokens, s.shared_intermediate, false);
  }
  const int logits = site.Transient("router.logits", d.Act(e));
  site.Saved("router.probs", d.Fp32(e));  // softmax in fp32
  site.Drop(logits);
  site.Saved("topk.indices", routed * 8, false);
  if (s.norm_topk) {
    // The in-place division by the sum keeps the sum and the values.
    site.Saved("topk.sum", d.tokens * 4, false);
    site.Saved("topk.values", routed * 4, false);
  }
  site.Saved("expert.sort_permutation", routed * 8, false);
  site.Saved("expert.token_indices", routed * 8, false);
  site.Saved("expert.offsets", e * 4, false);
  site.Saved("expert.inputs", routed * double(s.hidden) * d.b);
  MlpInterior(site, d, "expert.", routed, s.expert_intermediate, true);
  // Mixtral's weights stay fp32; Qwen2-MoE casts them to the model's dtype.
  site.Saved("expert.weights", routed * (s.family == Family::kMixtral ? 4 : d.b));
  site.Saved("expert.outputs", routed * double(s.hidden) * d.b);
  site.Saved("expert.inverse_permutation", routed * 8, false);
  if (s.shared_intermediate > 0) {
    site.Saved("shared.gate", d.Act(1));  // sigmoid
    site.Saved("shared.out", d.Hidden());
  }
}

void MlpSite(SiteBuilder& site, const Hf& d) {
  // GPT-NeoX's parallel residual: both norms read the layer's input.
  if (!d.s.parallel_residual) site.Maybe(d.NormKeepsInput(), "input", d.Hidden());
  Norm(site, d, "mlp_norm");
  if (d.s.moe()) {
    ExpertsSite(site, d);
    return;
  }
  MlpInterior(site, d, "", d.tokens, d.s.intermediate, d.s.fused_gate_up);
  Residual(site, d, "down");
}

// The final norm, the logits, their fp32 copy for the loss and its
// log-softmax (ForCausalLMLoss), the targets.
void HeadSite(SiteBuilder& site, const Hf& d) {
  site.Maybe(d.NormKeepsInput(), "final_norm.input", d.Hidden());
  Norm(site, d, "final_norm");
  LossTail(site, d);
}

void EmbeddingSite(SiteBuilder& site, const Hf& d) {
  site.Saved("token_ids", d.tokens * 8, false);
  if (d.s.positions > 0) site.Saved("position_ids", double(d.o.seq) * 8, false);
  if (d.s.embedding_dropout) {
    site.Saved("dropout_mask", d.Mask(d.tokens * double(d.s.hidden)), false);
  }
}

}  // namespace

absl::StatusOr<SiteActivations> TransformersActivationsOf(Site site, const TransformerShape& shape,
                                                          const ActivationOptions& options) {
  if (shape.act == HiddenAct::kOther && (site == Site::kMlp || site == Site::kExpert)) {
    return absl::InvalidArgumentError(
        "--kernels=transformers models the MLP activations silu, gelu, gelu_pytorch_tanh, "
        "gelu_new, quick_gelu and relu; this model's is another (--kernels=fused counts any "
        "as one fused kernel)");
  }
  SiteBuilder builder;
  const Hf d(shape, options);
  switch (site) {
    case Site::kNone:
    case Site::kExpert: break;
    case Site::kEmbedding: EmbeddingSite(builder, d); break;
    case Site::kAttention: AttentionSite(builder, d); break;
    case Site::kMlp: MlpSite(builder, d); break;
    case Site::kHead: HeadSite(builder, d); break;
  }
  return std::move(builder).Done();
}

}  // namespace zero::footprint
