#include "footprint/step_script.h"

#include <map>
#include <optional>
#include <vector>

#include "base/status_macros.h"

namespace zero::footprint {
namespace {

// Where a transformer layer's modules are used in forward.
struct LayerUses {
  size_t attention_use = 0;
  std::optional<size_t> mlp_use;  // the MLP site (a mixture's router)
  size_t last_use = 0;            // its first use in backward
};

class ScriptBuilder {
 public:
  ScriptBuilder(const ModelSpec& model, const std::optional<ActivationOptions>& options)
      : model_(model),
        order_(model.ForwardOrder()),
        options_(model.transformer.has_value() && !model.sites.empty() ? options
                                                                       : std::nullopt),
        kept_(order_.size()),
        layer_of_(order_.size(), -1) {}

  absl::StatusOr<StepScript> Build() && {
    if (options_.has_value()) {
      for (Site site : {Site::kEmbedding, Site::kAttention, Site::kMlp, Site::kHead}) {
        ASSIGN_OR_RETURN(sites_[site], ActivationsOf(site, *model_.transformer, *options_));
      }
      script_.layers = static_cast<int>(model_.transformer->layers);
    }
    for (size_t u = 0; u < order_.size(); ++u) Forward(u);
    Op(StepOp::Kind::kMark, kBackward);
    std::vector<bool> seen(model_.modules.size());
    std::vector<bool> last_backward_use(order_.size());
    for (size_t u = 0; u < order_.size(); ++u) {
      last_backward_use[u] = !seen[order_[u]];
      seen[order_[u]] = true;
    }
    for (size_t u = order_.size(); u-- > 0;) Backward(u, last_backward_use[u]);
    Op(StepOp::Kind::kMark, kOptimizer);
    return std::move(script_);
  }

 private:
  Site SiteOf(size_t use) const {
    return options_.has_value() ? model_.sites[use] : Site::kNone;
  }
  Checkpointing Mode() const { return options_->checkpointing; }
  static bool HasActivations(Site site) { return site != Site::kNone && site != Site::kExpert; }

  void Op(StepOp::Kind kind, int arg) { script_.ops.push_back({kind, arg}); }
  int Alloc(uint64_t bytes) {
    script_.slot_bytes.push_back(bytes);
    const int slot = static_cast<int>(script_.slot_bytes.size()) - 1;
    Op(StepOp::Kind::kAlloc, slot);
    return slot;
  }

  void Forward(size_t u) {
    const Site site = SiteOf(u);
    Op(StepOp::Kind::kFetch, order_[u]);
    if (site == Site::kAttention) {
      Op(StepOp::Kind::kMark, kLayer + layer_++);
      LayerUses layer;
      layer.attention_use = u;
      layers_.push_back(layer);
    }
    if (site == Site::kHead) Op(StepOp::Kind::kMark, kLayer + layer_);
    // A layer's uses: its attention, its MLP site, a mixture's experts.
    const bool in_layer =
        site == Site::kAttention || ((site == Site::kMlp || site == Site::kExpert) && in_layer_);
    in_layer_ = in_layer;
    if (in_layer) {
      layer_of_[u] = layer_ - 1;
      layers_.back().last_use = u;
      if (site == Site::kMlp) layers_.back().mlp_use = u;
    }
    if (HasActivations(site)) {
      const SiteActivations& acts = sites_.at(site);
      kept_[u] = Play(acts, [](int) { return true; },
                      [&](int i) { return KeptInForward(acts, i, site, Mode()); });
    }
    Op(StepOp::Kind::kRelease, order_[u]);
  }

  // Creates the tensors `create` selects in order, frees transients as
  // forward does and, at the end, every one `keep` rejects. Returns the
  // kept slots with their tensors.
  template <typename Create, typename Keep>
  std::vector<std::pair<int, const ActTensor*>> Play(const SiteActivations& acts, Create create,
                                                     Keep keep) {
    std::vector<int> slot(acts.tensors.size(), -1);
    for (size_t i = 0; i < acts.tensors.size(); ++i) {
      if (!create(static_cast<int>(i))) continue;
      slot[i] = Alloc(acts.tensors[i].bytes);
      for (int dropped : acts.drops[i]) {
        if (slot[dropped] < 0) continue;
        Op(StepOp::Kind::kFree, slot[dropped]);
        slot[dropped] = -1;
      }
    }
    std::vector<std::pair<int, const ActTensor*>> kept;
    for (size_t i = 0; i < acts.tensors.size(); ++i) {
      if (slot[i] < 0) continue;
      if (keep(static_cast<int>(i))) {
        kept.emplace_back(slot[i], &acts.tensors[i]);
      } else {
        Op(StepOp::Kind::kFree, slot[i]);
      }
    }
    return kept;
  }

  // Full checkpointing: the layer's forward again, at its first backward
  // use `u` (already fetched), each other module of the layer fetched to
  // run it: the attention, and for a mixture the router and every expert
  // (the router's MLP site stands for the mixture's activations).
  void RecomputeLayer(const LayerUses& layer, size_t u) {
    const SiteActivations& attn = sites_.at(Site::kAttention);
    const SiteActivations& mlp = sites_.at(Site::kMlp);
    auto saved = [](const SiteActivations& a) {
      return [&a](int i) { return a.tensors[i].saved; };
    };
    for (size_t v = layer.attention_use; v <= u; ++v) {
      if (v != u) Op(StepOp::Kind::kFetch, order_[v]);
      if (v == layer.attention_use) {
        auto again = Play(attn, [](int i) { return i > 0; }, saved(attn));
        kept_[v].insert(kept_[v].end(), again.begin(), again.end());
      }
      if (v == *layer.mlp_use) kept_[v] = Play(mlp, [](int) { return true; }, saved(mlp));
      if (v != u) Op(StepOp::Kind::kRelease, order_[v]);
    }
  }

  // Backward through a site: the gradient arriving from above, then per
  // kept tensor, newest first, its gradient (when it has one), its release.
  void BackwardActivations(size_t u) {
    const int incoming = Alloc(sites_.at(Site::kAttention).tensors[0].bytes);
    int gradient = -1;
    for (auto it = kept_[u].rbegin(); it != kept_[u].rend(); ++it) {
      if (it->second->grad) {
        const int next = Alloc(it->second->bytes);
        if (gradient >= 0) Op(StepOp::Kind::kFree, gradient);
        gradient = next;
      }
      Op(StepOp::Kind::kFree, it->first);
    }
    if (gradient >= 0) Op(StepOp::Kind::kFree, gradient);
    Op(StepOp::Kind::kFree, incoming);
    kept_[u].clear();
  }

  void Backward(size_t u, bool hand_over) {
    const Site site = SiteOf(u);
    Op(StepOp::Kind::kFetch, order_[u]);
    if (Mode() == Checkpointing::kFull && layer_of_[u] >= 0) {
      const LayerUses& layer = layers_[layer_of_[u]];
      if (layer.last_use == u && layer.mlp_use.has_value()) RecomputeLayer(layer, u);
    }
    if (site == Site::kAttention && Mode() == Checkpointing::kSelective) {
      const SiteActivations& attn = sites_.at(Site::kAttention);
      auto core = Play(attn, [&](int i) { return attn.tensors[i].core; },
                       [&](int i) { return attn.tensors[i].saved; });
      kept_[u].insert(kept_[u].end(), core.begin(), core.end());
    }
    if (HasActivations(site)) BackwardActivations(u);
    if (hand_over) Op(StepOp::Kind::kGrads, order_[u]);
    Op(StepOp::Kind::kRelease, order_[u]);
  }

  const ModelSpec& model_;
  const std::vector<int> order_;
  const std::optional<ActivationOptions> options_;
  std::map<Site, SiteActivations> sites_;
  std::vector<std::vector<std::pair<int, const ActTensor*>>> kept_;  // per use
  std::vector<int> layer_of_;  // per use: its layer, -1 outside the layers
  std::vector<LayerUses> layers_;
  bool in_layer_ = false;  // the last use seen in forward was a layer's
  int layer_ = 0;
  StepScript script_;
};

}  // namespace

absl::StatusOr<StepScript> BuildStepScript(const ModelSpec& model,
                                           const std::optional<ActivationOptions>& activations) {
  return ScriptBuilder(model, activations).Build();
}

}  // namespace zero::footprint
