#include "zero/internal/host_loop.h"

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero {

absl::Status RunOnHost(const RankContext& ctx, const char* what,
                       const std::function<void()>& loop) {
  if (!ctx.has_bytes) return absl::OkStatus();
  if (ctx.on_card()) {
    return absl::UnimplementedError(absl::StrFormat("%s on cards is not implemented yet", what));
  }
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  loop();
  return absl::OkStatus();
}

}  // namespace zero
