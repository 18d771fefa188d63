// One optimizer call over a piece of the owned state, wherever the engine
// runs it: ordered on the rank's stream on its device (the update of state
// in device memory), or on the calling thread over host memory (offload's
// CPU step, on the engine's thread or its worker). Both the engine's step
// and the host stepper build their calls here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "optimizers/optimizer.h"
#include "zero/internal/rank_context.h"

namespace zero {

// The optimizer's gradient scale: a value, or (clipping, fp16) value x the
// float at `at`, in device memory, written by an earlier op on the stream.
struct GradScale {
  float value;
  const float* at = nullptr;
};

struct PieceUpdate {
  std::span<float> master;  // fp32 master weights, updated in place
  size_t first_element;     // of master[0] in the layout's flat numbering
  std::span<const std::span<float>> state;  // the optimizer's buffers over the piece
  const void* grads;        // master.size() reduced gradients of the model dtype
  void* copy;               // mixed precision: the updated piece in the model dtype; else null
  int64_t step;
  GradScale scale;
};

// Enqueued on ctx.stream: the host does not wait, and on host devices a
// collective that failed on a stream before it calls the update off, so a
// failed step changes no parameter.
absl::Status UpdateOnStream(const RankContext& ctx, Optimizer& optimizer,
                            const PieceUpdate& update);
// On the calling thread, over host memory; returns when done.
absl::Status UpdateOnHost(const RankContext& ctx, Optimizer& optimizer, const PieceUpdate& update);

}  // namespace zero
