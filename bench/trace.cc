#include "bench/trace.h"

#include "absl/container/flat_hash_map.h"
#include "base/status_macros.h"

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

// The parameter tensors of one block, as nn.TransformerEncoderLayer has them.
std::vector<size_t> LayerParams(size_t h) {
  return {h, h, 3 * h * h, 3 * h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h};
}

}  // namespace

std::vector<TraceOp> TransformerTrace(const TransformerShape& s) {
  TraceBuilder t(s.bytes_per_element);
  const size_t h = s.hidden, tokens = size_t(s.seq) * s.batch;
  const size_t scores = size_t(s.batch) * s.heads * s.seq * s.seq;
  std::vector<size_t> param_sizes = {size_t(s.vocab) * h, size_t(s.seq) * h};
  for (int l = 0; l < s.layers; ++l) {
    for (size_t p : LayerParams(h)) param_sizes.push_back(p);
  }
  for (size_t p : param_sizes) t.Alloc(p, Tag::kParameters);
  std::vector<uint32_t> moments;
  for (int step = 0; step < s.steps; ++step) {
    // Forward: each block saves what its backward needs.
    std::vector<std::vector<uint32_t>> saved(s.layers);
    uint32_t x = t.Alloc(tokens * h, Tag::kActivations);
    for (int l = 0; l < s.layers; ++l) {
      auto& keep = saved[l];
      keep.push_back(t.Alloc(tokens * h, Tag::kActivations));      // ln1 out
      keep.push_back(t.Alloc(3 * tokens * h, Tag::kActivations));  // qkv
      keep.push_back(t.Alloc(scores, Tag::kActivations));          // softmax(QK^T)
      t.Scratch(scores, Tag::kActivations);                        // raw scores
      keep.push_back(t.Alloc(tokens * h, Tag::kActivations));      // attention out
      keep.push_back(t.Alloc(tokens * h, Tag::kActivations));      // ln2 out
      keep.push_back(t.Alloc(4 * tokens * h, Tag::kActivations));  // fc1 out
      keep.push_back(t.Alloc(4 * tokens * h, Tag::kActivations));  // gelu out
      uint32_t y = t.Alloc(tokens * h, Tag::kActivations);         // block out
      keep.push_back(x);
      x = y;
    }
    uint32_t logits = t.Alloc(tokens * s.vocab, Tag::kActivations);
    t.Scratch(tokens * s.vocab, Tag::kActivations);  // log-softmax
    // Backward: gradients of parameters appear, activations go.
    std::vector<uint32_t> grads;
    uint32_t dy = t.Alloc(tokens * s.vocab, Tag::kActivations);
    t.Free(logits);
    grads.push_back(t.Alloc(size_t(s.vocab) * h, Tag::kGradients));
    uint32_t dx = t.Alloc(tokens * h, Tag::kActivations);
    t.Free(dy);
    t.Free(x);
    for (int l = s.layers - 1; l >= 0; --l) {
      t.Scratch(4 * tokens * h, Tag::kActivations);  // d gelu
      t.Scratch(scores, Tag::kActivations);          // d softmax
      for (size_t p : LayerParams(h)) grads.push_back(t.Alloc(p, Tag::kGradients));
      uint32_t next = t.Alloc(tokens * h, Tag::kActivations);
      t.Free(dx);
      dx = next;
      for (uint32_t a : saved[l]) t.Free(a);
    }
    grads.push_back(t.Alloc(size_t(s.seq) * h, Tag::kGradients));
    t.Free(dx);
    // Adam: moments are created lazily by the first step, then kept.
    if (moments.empty()) {
      for (size_t p : param_sizes) {
        moments.push_back(t.Alloc(p, Tag::kOptimizerState));
        moments.push_back(t.Alloc(p, Tag::kOptimizerState));
      }
    }
    for (size_t p : param_sizes) t.Scratch(p, Tag::kOptimizerState);  // denom
    for (uint32_t g : grads) t.Free(g);  // zero_grad(set_to_none=True)
  }
  return t.Take();
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
