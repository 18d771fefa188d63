// The C ABI's engine description: one JSON object with the EngineConfig
// fields under their own names plus the optimizer and its parameter groups
// (zero_engine.h documents the keys). Strict: an unknown key, a wrong type or
// a value out of range is InvalidArgument naming the key and its LINE:COL.
// Pure functions, any thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizers/adam.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"
#include "zero/config.h"

namespace zero {

// torch.optim's optimizers as the engine runs them: one kind, and the
// hyper-parameters of each parameter group (torch's defaults where absent).
struct OptimizerGroups {
  enum class Kind { kAdam, kAdamW, kSgd };
  Kind kind = Kind::kAdamW;
  std::vector<AdamConfig> adam;  // kAdam, kAdamW: one per group
  std::vector<SgdConfig> sgd;    // kSgd: one per group

  int size() const { return static_cast<int>(kind == Kind::kSgd ? sgd.size() : adam.size()); }
  // The optimizer of group `group` (validated by the optimizers' factories).
  absl::StatusOr<std::unique_ptr<Optimizer>> Make(int group) const;
};

struct EngineSetup {
  EngineConfig config;
  OptimizerGroups optimizer;
};

absl::StatusOr<EngineSetup> ParseEngineSetup(std::string_view json);

}  // namespace zero
