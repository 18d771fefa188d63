// A generated allocation trace of transformer training steps, in the order
// PyTorch would allocate: parameters once; per step the forward pass keeps
// activations layer by layer, backward frees them in reverse while gradients
// appear, the first optimizer step creates Adam's two moments, and
// zero_grad frees the gradients. Used by the pool demo and the benchmarks.
// The model is footprint's (footprint/transformer_shape.h): its layers'
// parameters are the ones BuildTransformer gives them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "footprint/transformer_shape.h"
#include "memory/pool.h"
#include "memory/tag.h"

namespace zero {

struct TraceOp {
  bool alloc;    // false: free
  uint32_t id;   // names the allocation across its alloc and free
  size_t bytes;
  Tag tag;
};

// What a trace runs beside the model's shape.
struct TraceOptions {
  int seq = 512;
  int batch = 4;
  int steps = 3;
  int bytes_per_element = 4;  // fp32
};

// GPT-2 (footprint's GPT shape) of `layers` blocks of `hidden`, `heads`
// heads (a divisor of hidden), with learned positions for `seq` tokens.
// The defaults are GPT-2 small at 512 tokens.
footprint::TransformerShape TraceShape(int layers = 12, int hidden = 768, int heads = 12,
                                       int seq = 512);

// Eager attention, a plain MLP, a head tied to the token embedding; the
// final norm is left out.
std::vector<TraceOp> TransformerTrace(const footprint::TransformerShape& shape,
                                      const TraceOptions& options = {});

struct ReplayResult {
  size_t peak_allocated = 0;  // block bytes: requests rounded up by the pool
  size_t peak_requested = 0;  // what the trace asked for
  size_t peak_reserved = 0;
  size_t ops = 0;
};

// Runs `trace` against `resource`, then frees whatever is still live.
// Peaks come from `pool`'s statistics (reset first).
absl::StatusOr<ReplayResult> Replay(const std::vector<TraceOp>& trace, DevicePool& pool);

}  // namespace zero
