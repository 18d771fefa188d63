// The engine's description as one JSON object (what the C ABI's
// zero_engine_create takes; zero/capi/zero_engine.h documents the keys): the
// EngineConfig fields under their own names plus the optimizer and its
// parameter groups. Strict: an unknown key, a wrong type or a value out of
// range is InvalidArgument naming the key and its LINE:COL. Pure
// functions, any thread.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "optimizers/optimizer_groups.h"
#include "zero/config.h"

namespace zero {

struct EngineSetup {
  EngineConfig config;
  OptimizerGroups optimizer;
};

absl::StatusOr<EngineSetup> ParseEngineSetup(std::string_view json);

}  // namespace zero
