// SGD with momentum, dampening, Nesterov and weight decay, exactly
// torch.optim.SGD: same fp32 operations in the same order as torch's
// single-tensor path (see sgd_rule.h).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "optimizers/optimizer.h"

namespace zero {

// Defaults are torch.optim.SGD's (torch >= 2.2: lr 1e-3).
struct SgdConfig {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

// InvalidArgument for lr, momentum or weight_decay < 0 (or not finite), a
// non-finite dampening, or Nesterov without momentum or with dampening.
// state_buffers() is 1 (the momentum buffer) when momentum != 0, else 0; the
// buffer is (re)initialized from the gradient on step 1, as torch does.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeSgd(const SgdConfig& config = {});

}  // namespace zero
