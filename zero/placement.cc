#include "zero/placement.h"

namespace zero {

size_t Placement::bytes(Home home) const {
  size_t total = 0;
  for (const Placed& p : states) {
    if (p.home == home) total += p.bytes * p.count;
  }
  return total;
}

Placement Placement::InMemory() const {
  Placement memory = *this;
  for (Placed& p : memory.states) {
    if (p.home == Home::kNvme) p = Placed{};
  }
  return memory;
}

Placement PlaceStates(const EngineConfig& config, int state_buffers, size_t full, size_t shard) {
  const int stage = config.stage;
  const size_t e = SizeOf(config.param_dtype);
  const bool mixed = config.param_dtype != DType::kF32;
  const bool offload = config.offload != Offload::kNone;
  const bool params_home = config.offload == Offload::kParameters;
  // Offloaded states are this rank's pieces even at stage 0's sizes: the
  // offload engine requires stage >= 1 (ValidateConfig).
  const Home owned_home = offload ? Home::kHost : Home::kDevice;
  // ZeRO-Infinity: master weights and optimizer state in the NVMe file.
  const bool nvme = offload && config.offload_device == OffloadDevice::kNvme;
  const Home state_home = nvme ? Home::kNvme : owned_home;
  Placement p;
  auto set = [&p](State s, Home home, size_t elements, size_t esize, Tag tag, int count = 1) {
    p.states[static_cast<int>(s)] = Placed{home, elements * esize, count, tag};
  };
  set(State::kParams, params_home ? Home::kHost : Home::kDevice, stage == 3 ? shard : full, e,
      Tag::kParameters);
  // The paper counts fp32 master weights with the optimizer state (its K = 12).
  if (mixed || offload) {
    set(State::kMaster, state_home, stage == 0 ? full : shard, 4, Tag::kOptimizerState);
  }
  // The CPU step's output on its way up (with NVMe the master is not in memory).
  if (offload && (mixed || nvme) && !params_home) {
    set(State::kHostParams, Home::kHost, shard, e, Tag::kParameters);
  }
  if (stage <= 1) set(State::kGrads, Home::kDevice, full, e, Tag::kGradients);
  // Stage 1 keeps whole gradients; it needs owned pieces only to accumulate
  // them across micro-batches, or to hand them to the CPU step.
  if (stage >= 2 || (stage == 1 && (offload || config.gradient_accumulation_steps > 1))) {
    set(State::kOwnedGrads, owned_home, shard, e, Tag::kGradients);
  }
  if (state_buffers > 0) {
    set(State::kOptimizer, state_home, stage == 0 ? full : shard, 4, Tag::kOptimizerState,
        state_buffers);
  }
  return p;
}

}  // namespace zero
