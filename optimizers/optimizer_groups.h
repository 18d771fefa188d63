// torch.optim's optimizers as the engine runs them: one kind, and the
// hyper-parameters of each parameter group (torch's defaults where a
// config leaves them out). What zero/config_json.h reads and
// GroupedOptimizer (grouped_optimizer.h) is made from. A plain value.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizers/adam.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"

namespace zero {

struct OptimizerGroups {
  enum class Kind { kAdam, kAdamW, kSgd };
  Kind kind = Kind::kAdamW;
  std::vector<AdamConfig> adam;  // kAdam, kAdamW: one per group
  std::vector<SgdConfig> sgd;    // kSgd: one per group

  int size() const { return static_cast<int>(kind == Kind::kSgd ? sgd.size() : adam.size()); }
  // The optimizer of group `group` (validated by the optimizers' factories).
  absl::StatusOr<std::unique_ptr<Optimizer>> Make(int group) const;
};

}  // namespace zero
