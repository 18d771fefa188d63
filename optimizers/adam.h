// Adam and AdamW, exactly torch.optim.Adam / AdamW (amsgrad=False): the same
// fp32 operations in the same order as torch's single-tensor path, without
// the FMA fusing torch's own vector kernels do (see adam_rule.h).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "optimizers/adam_rule.h"
#include "optimizers/optimizer.h"

namespace zero {

// Defaults are torch.optim.Adam's. Doubles, like torch's Python floats.
struct AdamConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // true: AdamW (p *= 1 - lr*wd), else L2 (g += wd*p)
  bool maximize = false;
};

// torch.optim.AdamW's defaults: weight_decay 1e-2, decoupled.
AdamConfig AdamWDefaults();

// InvalidArgument for lr < 0, eps < 0, a beta outside [0, 1), weight_decay < 0
// or anything not finite. The optimizer has state_buffers() == 2:
// state[0] = exp_avg, state[1] = exp_avg_sq.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeAdam(const AdamConfig& config = {});
// MakeAdam with decoupled_weight_decay forced on.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeAdamW(AdamConfig config = AdamWDefaults());

// The fp32 constants of one step (what the kernels consume), derived in
// double from the config as torch derives them in Python.
AdamScalars MakeAdamScalars(const AdamConfig& config, int64_t step, float grad_scale);

}  // namespace zero
