#include "bench/trace.h"

#include "absl/container/flat_hash_map.h"
#include "base/status_macros.h"
#include "footprint/model.h"
#include "footprint/presets.h"
#include "footprint/transformer.h"

namespace zero {
namespace {

class TraceBuilder {
 public:
  explicit TraceBuilder(int bytes_per_element) : bpe_(bytes_per_element) {}
  uint32_t Alloc(size_t elements, Tag tag) {
    ops_.push_back({true, next_, elements * bpe_, tag});
    sizes_[next_] = {elements * bpe_, tag};
    return next_++;
  }
  void Free(uint32_t id) { ops_.push_back({false, id, sizes_[id].first, sizes_[id].second}); }
  // A temporary: allocated and freed at once (e.g. a fused kernel's scratch).
  void Scratch(size_t elements, Tag tag) { Free(Alloc(elements, tag)); }
  std::vector<TraceOp> Take() { return std::move(ops_); }

 private:
  const int bpe_;
  uint32_t next_ = 0;
  std::vector<TraceOp> ops_;
  absl::flat_hash_map<uint32_t, std::pair<size_t, Tag>> sizes_;
};

// The parameter tensors of each block (its attention and MLP sub-layers),
// as footprint's model of the shape has them.
std::vector<std::vector<size_t>> LayerParams(const footprint::TransformerShape& shape) {
  const footprint::ModelSpec model =
      footprint::BuildTransformer("trace", shape, /*gpt2_names=*/true);
  const std::vector<int> uses = model.ForwardOrder();
  std::vector<std::vector<size_t>> layers;
  for (size_t u = 0; u < uses.size(); ++u) {
    const footprint::Site site = model.sites[u];
    if (site == footprint::Site::kAttention) layers.emplace_back();
    if (site != footprint::Site::kAttention && site != footprint::Site::kMlp) continue;
    for (const footprint::ParamShape& p : model.modules[uses[u]].params) {
      layers.back().push_back(p.numel());
    }
  }
  return layers;
}

// The training steps of one shape; sizes in elements.
class StepWriter {
 public:
  StepWriter(const footprint::TransformerShape& s, const TraceOptions& o)
      : t_(o.bytes_per_element),
        steps_(o.steps),
        h_(s.hidden),
        vocab_(s.vocab),
        positions_(s.positions),
        tokens_(size_t(o.seq) * o.batch),
        scores_(size_t(o.batch) * s.heads * o.seq * o.seq),
        qkv_(s.q_width() + 2 * s.kv_width()),
        merged_(s.q_width()),
        ff_(s.intermediate),
        layers_(LayerParams(s)) {}

  std::vector<TraceOp> Write() && {
    params_ = {vocab_ * h_};
    if (positions_ > 0) params_.push_back(positions_ * h_);
    for (const auto& layer : layers_) params_.insert(params_.end(), layer.begin(), layer.end());
    for (size_t p : params_) t_.Alloc(p, Tag::kParameters);
    for (int step = 0; step < steps_; ++step) {
      std::vector<std::vector<uint32_t>> saved = Forward();
      std::vector<uint32_t> grads = Backward(saved);
      Optimizer();
      for (uint32_t g : grads) t_.Free(g);  // zero_grad(set_to_none=True)
    }
    return t_.Take();
  }

 private:
  // Each block saves what its backward needs; the last of each block's
  // list is its input. Leaves x_ (the last block's output) and logits_.
  std::vector<std::vector<uint32_t>> Forward() {
    std::vector<std::vector<uint32_t>> saved(layers_.size());
    x_ = t_.Alloc(tokens_ * h_, Tag::kActivations);
    for (auto& keep : saved) {
      keep.push_back(t_.Alloc(tokens_ * h_, Tag::kActivations));     // ln1 out
      keep.push_back(t_.Alloc(tokens_ * qkv_, Tag::kActivations));   // qkv
      keep.push_back(t_.Alloc(scores_, Tag::kActivations));          // softmax(QK^T)
      t_.Scratch(scores_, Tag::kActivations);                        // raw scores
      keep.push_back(t_.Alloc(tokens_ * merged_, Tag::kActivations));  // attention out
      keep.push_back(t_.Alloc(tokens_ * h_, Tag::kActivations));     // ln2 out
      keep.push_back(t_.Alloc(tokens_ * ff_, Tag::kActivations));    // fc1 out
      keep.push_back(t_.Alloc(tokens_ * ff_, Tag::kActivations));    // gelu out
      const uint32_t y = t_.Alloc(tokens_ * h_, Tag::kActivations);  // block out
      keep.push_back(x_);
      x_ = y;
    }
    logits_ = t_.Alloc(tokens_ * vocab_, Tag::kActivations);
    t_.Scratch(tokens_ * vocab_, Tag::kActivations);  // log-softmax
    return saved;
  }

  // Gradients of parameters appear, activations go. Returns the gradients.
  std::vector<uint32_t> Backward(const std::vector<std::vector<uint32_t>>& saved) {
    std::vector<uint32_t> grads;
    const uint32_t dy = t_.Alloc(tokens_ * vocab_, Tag::kActivations);
    t_.Free(logits_);
    grads.push_back(t_.Alloc(vocab_ * h_, Tag::kGradients));
    uint32_t dx = t_.Alloc(tokens_ * h_, Tag::kActivations);
    t_.Free(dy);
    t_.Free(x_);
    for (size_t l = layers_.size(); l-- > 0;) {
      t_.Scratch(tokens_ * ff_, Tag::kActivations);  // d gelu
      t_.Scratch(scores_, Tag::kActivations);        // d softmax
      for (size_t p : layers_[l]) grads.push_back(t_.Alloc(p, Tag::kGradients));
      const uint32_t next = t_.Alloc(tokens_ * h_, Tag::kActivations);
      t_.Free(dx);
      dx = next;
      for (uint32_t a : saved[l]) t_.Free(a);
    }
    if (positions_ > 0) grads.push_back(t_.Alloc(positions_ * h_, Tag::kGradients));
    t_.Free(dx);
    return grads;
  }

  // Adam: moments are created lazily by the first step, then kept.
  void Optimizer() {
    if (!moments_created_) {
      for (size_t p : params_) {
        t_.Alloc(p, Tag::kOptimizerState);
        t_.Alloc(p, Tag::kOptimizerState);
      }
      moments_created_ = true;
    }
    for (size_t p : params_) t_.Scratch(p, Tag::kOptimizerState);  // denom
  }

  TraceBuilder t_;
  const int steps_;
  const size_t h_, vocab_, positions_, tokens_, scores_;
  const size_t qkv_, merged_, ff_;  // widths: queries, keys and values; merged heads; MLP
  const std::vector<std::vector<size_t>> layers_;
  std::vector<size_t> params_;
  uint32_t x_ = 0, logits_ = 0;
  bool moments_created_ = false;
};

}  // namespace

footprint::TransformerShape TraceShape(int layers, int hidden, int heads, int seq) {
  footprint::TransformerShape shape = footprint::GptShape(layers, hidden, heads);
  shape.positions = seq;
  return shape;
}

std::vector<TraceOp> TransformerTrace(const footprint::TransformerShape& shape,
                                      const TraceOptions& options) {
  return StepWriter(shape, options).Write();
}

absl::StatusOr<ReplayResult> Replay(const std::vector<TraceOp>& trace, DevicePool& pool) {
  pool.ResetPeaks();
  absl::flat_hash_map<uint32_t, void*> live;
  ReplayResult result;
  for (const TraceOp& op : trace) {
    if (op.alloc) {
      ASSIGN_OR_RETURN(live[op.id], pool.Allocate(op.bytes, op.tag));
    } else {
      RETURN_IF_ERROR(pool.Deallocate(live[op.id], op.bytes));
      live.erase(op.id);
    }
    ++result.ops;
  }
  const PoolStats stats = pool.stats();
  result.peak_allocated = stats.peak_allocated;
  result.peak_requested = stats.peak_requested;
  result.peak_reserved = stats.peak_reserved;
  for (const auto& [id, ptr] : live) {
    for (const TraceOp& op : trace) {
      if (op.alloc && op.id == id) {
        RETURN_IF_ERROR(pool.Deallocate(ptr, op.bytes));
        break;
      }
    }
  }
  return result;
}

}  // namespace zero
