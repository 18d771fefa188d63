#include "optimizers/optimizer_groups.h"

#include "absl/strings/str_format.h"

namespace zero {

absl::StatusOr<std::unique_ptr<Optimizer>> OptimizerGroups::Make(int group) const {
  if (group < 0 || group >= size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no parameter group %d (%d are configured)", group, size()));
  }
  switch (kind) {
    case Kind::kAdam:
      return MakeAdam(adam[group]);
    case Kind::kAdamW:
      return MakeAdamW(adam[group]);
    case Kind::kSgd:
      return MakeSgd(sgd[group]);
  }
  return absl::InternalError("unknown optimizer kind");
}

}  // namespace zero
