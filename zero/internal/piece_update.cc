#include "zero/internal/piece_update.h"

namespace zero {
namespace {

StepArgs ArgsOf(const RankContext& ctx, const PieceUpdate& u) {
  return StepArgs{.params = u.master,
                  .grads = u.grads,
                  .grad_dtype = ctx.dtype,
                  .state = u.state,
                  .step = u.step,
                  .grad_scale = u.scale.value,
                  .grad_scale_at = u.scale.at,
                  .param_copy = u.copy,
                  .copy_dtype = ctx.mixed ? ctx.dtype : DType::kBF16,
                  .first_element = u.first_element};
}

}  // namespace

absl::Status UpdateOnStream(const RankContext& ctx, Optimizer& optimizer,
                            const PieceUpdate& update) {
  return optimizer.Step(ArgsOf(ctx, update), ctx.devices->kind(), ctx.stream,
                        [comm = ctx.comm] { return comm->AsyncError().ok(); });
}

absl::Status UpdateOnHost(const RankContext& ctx, Optimizer& optimizer,
                          const PieceUpdate& update) {
  return optimizer.Step(ArgsOf(ctx, update));
}

}  // namespace zero
