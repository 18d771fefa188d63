#include "footprint/activations.h"

#include "footprint/activations_hf.h"
#include "footprint/site_builder.h"

namespace zero::footprint {
namespace {

// Flash's layout: under fused kernels sdpa means it too.
bool Flash(const ActivationOptions& o) { return o.attention != Attention::kEager; }

// A norm keeps its input (unless another norm already keeps the same
// tensor), its statistics and its output.
void Norm(SiteBuilder& site, const Dims& d, const std::string& name, bool input) {
  if (input) site.Saved(name + ".input", d.Hidden());
  site.Saved(name + ".stats", d.Fp32(d.s.norm == NormKind::kLayerNorm ? 2 : 1), false);
  site.Saved(name + ".out", d.Hidden());
}

// What a site's output projection leaves: the projection's output and,
// with dropout, its mask (the residual sum is the next site's input).
void Residual(SiteBuilder& site, const Dims& d, const std::string& prefix) {
  const int out = site.Transient(prefix + ".out", d.Hidden());
  if (!d.s.dropout) return;
  site.Saved(prefix + ".dropout_mask", d.tokens * double(d.s.hidden), false);
  site.Transient(prefix + ".dropped", d.Hidden());
  site.Drop(out);
}

// q, k and v as attention reads them. Rotary positions make new q and k
// from the projections; eager attention repeats grouped k and v per head.
void QueryKeyValue(SiteBuilder& site, const Dims& d) {
  const TransformerShape& s = d.s;
  const double q = d.Act(double(s.q_width())), kv = d.Act(double(s.kv_width()));
  const bool rotary = s.positions == 0;
  const bool repeat = !Flash(d.o) && s.kv_heads < s.heads;
  if (s.fused_qkv && Flash(d.o)) {
    // q, k and v are views of one tensor, which flash attention reads as
    // they are: keeping v (and, without rotary positions, q and k) keeps all.
    site.Saved("qkv", q + 2 * kv);
    if (rotary) {
      site.Saved("q.rotary", q);
      site.Saved("k.rotary", kv);
    }
    return;
  }
  // Separate projections; or eager attention, whose matrix products copy
  // the head-transposed views they are given, so a fused projection's
  // output is not kept.
  const int qkv = s.fused_qkv ? site.Transient("qkv", q + 2 * kv) : -1;
  const int q_proj = rotary ? site.Transient("q", q) : site.Saved("q", q);
  const int k_proj = rotary ? site.Transient("k", kv) : -1;
  const int v = repeat ? site.Transient("v", kv) : site.Saved("v", kv);
  if (rotary) {
    site.Saved("q.rotary", q);
    site.Drop(q_proj);
  }
  const int k = repeat ? site.Transient(rotary ? "k.rotary" : "k", kv)
                       : site.Saved(rotary ? "k.rotary" : "k", kv);
  if (k_proj >= 0) site.Drop(k_proj);
  if (qkv >= 0) site.Drop(qkv);
  if (repeat) {
    site.Saved("k.repeated", q);
    site.Drop(k);
    site.Saved("v.repeated", q);
    site.Drop(v);
  }
}

void AttentionSite(SiteBuilder& site, const Dims& d) {
  const TransformerShape& s = d.s;
  Norm(site, d, "attn_norm", true);
  QueryKeyValue(site, d);
  const double q = d.Act(double(s.q_width()));
  if (Flash(d.o)) {
    site.Saved("attention.out", q);  // the output projection reads it as a view
    site.Saved("attention.lse", d.tokens * double(s.heads) * 4, false);
  } else {
    const double scores = double(s.heads) * double(d.o.seq) * d.tokens;
    const int raw = site.Transient("scores", scores * d.b, true);
    site.Core("probs", scores * d.b);
    site.Drop(raw);
    if (s.dropout) {
      site.Core("probs.dropout_mask", scores, false);
      site.Core("probs.dropped", scores * d.b);
    }
    const int context = site.Transient("context", q);
    site.Saved("context.merged", q);
    site.Drop(context);
  }
  Residual(site, d, "o_proj");
}

// A gated MLP keeps gate, up, act(gate) and their product (a fused
// gate-up projection keeps the one tensor both are views of); a plain one
// the up projection's output and the activation's.
void MlpInterior(SiteBuilder& site, const Dims& d, const std::string& prefix, double tokens,
                 uint64_t ff) {
  const double f = tokens * double(ff) * d.b;
  if (d.s.mlp == MlpKind::kPlain) {
    site.Saved(prefix + "up.out", f);
    site.Saved(prefix + "act.out", f);
    return;
  }
  if (d.s.fused_gate_up) {
    site.Saved(prefix + "gate_up", 2 * f);
  } else {
    site.Saved(prefix + "gate", f);
    site.Saved(prefix + "up", f);
  }
  site.Saved(prefix + "act", f);
  site.Saved(prefix + "product", f);
}

// Each token goes to top_k experts: their inputs, interiors and outputs
// add up to top_k x T tokens whatever the routing.
void ExpertsSite(SiteBuilder& site, const Dims& d) {
  const TransformerShape& s = d.s;
  const double routed = d.tokens * double(s.top_k), e = double(s.experts);
  const int logits = site.Transient("router.logits", d.Act(e));
  site.Saved("router.probs", d.Fp32(e));  // softmax in fp32
  site.Drop(logits);
  site.Saved("topk.indices", routed * 8, false);
  site.Saved("topk.weights", routed * 4);
  site.Saved("topk.sum", d.tokens * 4, false);
  site.Saved("expert.token_indices", routed * 8, false);
  site.Saved("expert.slot_indices", routed * 8, false);
  site.Saved("expert.inputs", routed * double(s.hidden) * d.b);
  MlpInterior(site, d, "expert.", routed, s.expert_intermediate);
  site.Saved("expert.outputs", routed * double(s.hidden) * d.b);
  site.Saved("expert.weights", routed * d.b);
  site.Saved("expert.weighted", routed * double(s.hidden) * d.b);  // index_add keeps its source
  if (s.shared_intermediate > 0) {
    MlpInterior(site, d, "shared.", d.tokens, s.shared_intermediate);
    site.Saved("shared.out", d.Hidden());
    site.Saved("shared.gate", d.Act(1));
  }
}

void MlpSite(SiteBuilder& site, const Dims& d) {
  Norm(site, d, "mlp_norm", !d.s.parallel_residual);
  if (d.s.moe()) {
    ExpertsSite(site, d);
    return;
  }
  MlpInterior(site, d, "", d.tokens, d.s.intermediate);
  Residual(site, d, "down");
}

void HeadSite(SiteBuilder& site, const Dims& d) {
  Norm(site, d, "final_norm", true);
  LossTail(site, d);
}

void EmbeddingSite(SiteBuilder& site, const Dims& d) {
  site.Saved("token_ids", d.tokens * 8, false);
  if (d.s.positions > 0) site.Saved("position_ids", double(d.o.seq) * 8, false);
  if (d.s.dropout) site.Saved("dropout_mask", d.tokens * double(d.s.hidden), false);
}

// Forward FLOPs of one token through one layer, without the score matrices.
double LayerFlopsPerToken(const TransformerShape& s) {
  const double h = double(s.hidden), q = double(s.q_width()), kv = double(s.kv_width());
  const double projections = 2 * h * (q + 2 * kv) + 2 * q * h;
  const double matrices = s.mlp == MlpKind::kGated ? 3 : 2;
  double mlp = 2 * h * double(s.intermediate) * matrices;
  if (s.moe()) {
    mlp = double(s.top_k) * 2 * h * double(s.expert_intermediate) * matrices +
          2 * h * double(s.experts) + 2 * h * double(s.shared_intermediate) * matrices;
  }
  return projections + mlp;
}

}  // namespace

bool KeptInForward(const SiteActivations& site, int index, Site kind, Checkpointing c) {
  const ActTensor& t = site.tensors[index];
  const bool in_layer = kind == Site::kAttention || kind == Site::kMlp;
  if (c == Checkpointing::kFull && in_layer) return kind == Site::kAttention && index == 0;
  return t.saved && !(t.core && c == Checkpointing::kSelective);
}

absl::Status ValidateActivationOptions(const ActivationOptions& o) {
  if (o.kernels == Kernels::kTransformers && o.checkpointing == Checkpointing::kSelective) {
    return absl::InvalidArgumentError(
        "selective checkpointing (recomputing eager attention's softmax, as Megatron-LM does) is "
        "not something transformers does: its gradient checkpointing recomputes whole layers "
        "(--checkpointing=full)");
  }
  return absl::OkStatus();
}

absl::StatusOr<SiteActivations> ActivationsOf(Site site, const TransformerShape& shape,
                                              const ActivationOptions& options) {
  if (absl::Status s = ValidateActivationOptions(options); !s.ok()) return s;
  if (options.kernels == Kernels::kTransformers) {
    return TransformersActivationsOf(site, shape, options);
  }
  SiteBuilder builder;
  const Dims d(shape, options);
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

absl::StatusOr<uint64_t> LayerSavedBytes(const TransformerShape& shape,
                                         const ActivationOptions& options) {
  uint64_t bytes = 0;
  for (Site site : {Site::kAttention, Site::kMlp}) {
    absl::StatusOr<SiteActivations> a = ActivationsOf(site, shape, options);
    if (!a.ok()) return a.status();
    for (size_t i = 0; i < a->tensors.size(); ++i) {
      if (KeptInForward(*a, static_cast<int>(i), site, options.checkpointing)) {
        bytes += a->tensors[i].bytes;
      }
    }
  }
  return bytes;
}

double KorthikantiLayerBytes(const TransformerShape& shape, const ActivationOptions& options) {
  const double sbh = double(options.seq) * double(options.micro_batch) * double(shape.hidden);
  if (options.checkpointing == Checkpointing::kFull) return 2 * sbh;
  if (options.checkpointing == Checkpointing::kSelective || Flash(options)) {
    return 34 * sbh;
  }
  return sbh * (34 + 5 * double(shape.heads) * double(options.seq) / double(shape.hidden));
}

double RecomputeFraction(const TransformerShape& s, const ActivationOptions& o) {
  const double layers = double(s.layers);
  const double core = 4 * double(o.seq) * double(s.q_width());  // QK^T and AV, per token
  const double forward =
      layers * (LayerFlopsPerToken(s) + core) + 2 * double(s.hidden) * double(s.vocab);
  double extra = 0;
  if (o.checkpointing == Checkpointing::kFull) extra = layers * (LayerFlopsPerToken(s) + core);
  if (o.checkpointing == Checkpointing::kSelective && o.attention == Attention::kEager) {
    extra = layers * core;
  }
  return extra / (3 * forward);
}

}  // namespace zero::footprint
