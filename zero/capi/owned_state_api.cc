// The owned state parameter by parameter (zero_engine.h, ABI 1.1): what a
// framework's optimizer state_dict reads and writes, over the same face of
// the engine that checkpoints use (zero/owned_state.h). A parameter lies in
// one unit, and a rank owns one contiguous run of each unit, so a rank's
// piece of a parameter is one run (or none).
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/capi/guard.h"
#include "zero/capi/zero_engine.h"
#include "memory/stream.h"
#include "zero/layout.h"
#include "zero/owned_state.h"

namespace zero::capi {
namespace {

// This rank's run of `param`: elements [param_offset, + count) of the
// parameter, at [piece_offset, + count) of its unit's owned piece.
struct OwnedRun {
  int unit = 0;
  size_t param_offset = 0, piece_offset = 0, count = 0;
};

absl::StatusOr<OwnedRun> RunOf(const zero_engine& handle, int param) {
  const Layout& layout = handle.engine->layout();
  const int params = static_cast<int>(layout.params().size());
  if (param < 0 || param >= params) {
    return absl::InvalidArgumentError(
        absl::StrFormat("parameter %d does not exist (the engine has %d)", param, params));
  }
  OwnedRun run;
  run.unit = layout.params()[param].unit;
  const Unit& unit = layout.units()[run.unit];
  for (const Piece& piece : layout.PiecesOf(param)) {
    if (piece.rank != handle.comm->rank()) continue;
    run.param_offset = piece.param_offset;
    run.piece_offset = piece.shard_offset - unit.shard_offset;
    run.count = piece.count;
  }
  return run;
}

int Planes(const zero_engine& handle) { return 1 + handle.optimizer->state_buffers(); }

// Checks that elements [begin, begin + count) of `param`'s plane `plane`
// lie in this rank's run; returns the run.
absl::StatusOr<OwnedRun> CheckedRun(const zero_engine& handle, int param, int plane,
                                    size_t begin, size_t count) {
  ASSIGN_OR_RETURN(const OwnedRun run, RunOf(handle, param));
  if (plane < 0 || plane >= Planes(handle)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "plane %d does not exist (0: master weights, 1-%d: the optimizer's state)", plane,
        Planes(handle) - 1));
  }
  if (begin < run.param_offset || begin + count > run.param_offset + run.count ||
      begin + count < begin) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "elements [%d, %d) of parameter %d are not this rank's: it owns [%d, %d)", begin,
        begin + count, param, run.param_offset, run.param_offset + run.count));
  }
  return run;
}

// Copies between `values` (host) and the plane where it lives: in memory
// (device or pinned host) by a copy on the engine's stream, waited for; in
// the NVMe state file chunk by chunk. Meta devices hold no bytes: nothing.
absl::Status Transfer(zero_engine& handle, int param, int plane, size_t begin, size_t count,
                      float* values, bool write) {
  ASSIGN_OR_RETURN(const OwnedRun run, CheckedRun(handle, param, plane, begin, count));
  if (count == 0) return absl::OkStatus();
  OwnedStateAccess& owned = handle.engine->owned_state();
  RETURN_IF_ERROR(owned.Settled(write ? "writing the owned state" : "reading the owned state"));
  const size_t at = run.piece_offset + (begin - run.param_offset);
  const OwnedStateAccess::Pieces pieces = owned.pieces(run.unit);
  float* base = plane == 0 ? pieces.master : pieces.state[plane - 1];
  if (base == nullptr) {
    using Access = OwnedStateAccess::Access;
    return owned.Stream(run.unit, at, count, write ? Access::kUpdate : Access::kRead,
                        [&](size_t offset, size_t n, std::span<float* const> planes) {
                          float* mine = values + (offset - at);
                          if (write) {
                            std::memcpy(planes[plane], mine, n * sizeof(float));
                          } else {
                            std::memcpy(mine, planes[plane], n * sizeof(float));
                          }
                          return absl::OkStatus();
                        });
  }
  Stream& stream = *handle.engine->stream();
  const size_t bytes = count * sizeof(float);
  RETURN_IF_ERROR(write ? stream.CopyFromPageable(base + at, values, bytes)
                        : stream.Copy(values, base + at, bytes));
  return stream.Synchronize();
}

}  // namespace
}  // namespace zero::capi

using zero::capi::Guard;
using zero::capi::Required;

extern "C" {

int zero_engine_owned_piece(zero_engine_t engine, int param, size_t* begin, size_t* count,
                            int* planes) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    ASSIGN_OR_RETURN(const zero::capi::OwnedRun run, zero::capi::RunOf(*engine, param));
    if (begin != nullptr) *begin = run.param_offset;
    if (count != nullptr) *count = run.count;
    if (planes != nullptr) *planes = zero::capi::Planes(*engine);
    return absl::OkStatus();
  });
}

int zero_engine_owned_read(zero_engine_t engine, int param, int plane, size_t begin,
                           size_t count, float* values) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    if (count > 0) RETURN_IF_ERROR(Required(values, "values"));
    return zero::capi::Transfer(*engine, param, plane, begin, count, values, /*write=*/false);
  });
}

int zero_engine_owned_write(zero_engine_t engine, int param, int plane, size_t begin,
                            size_t count, const float* values) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    if (count > 0) RETURN_IF_ERROR(Required(values, "values"));
    return zero::capi::Transfer(*engine, param, plane, begin, count,
                                const_cast<float*>(values), /*write=*/true);
  });
}

int zero_engine_restore(zero_engine_t engine, int64_t steps) {
  return Guard([&]() -> absl::Status {
    RETURN_IF_ERROR(Required(engine, "engine"));
    if (steps < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("steps %d < 0", steps));
    }
    zero::OwnedStateAccess& owned = engine->engine->owned_state();
    zero::ResumePoint point = owned.resume_point();  // keeps the loss scaler's state
    point.steps = steps;
    return owned.Restore(point);
  });
}

}  // extern "C"
