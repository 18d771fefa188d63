// Ranks as threads in one process, what the engine and checkpoint
// benchmarks train: host devices, a local communicator group, one AdamW
// every rank's engine shares, and an engine per rank. Built once, then each
// rank is driven from its own thread (OnRanks).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "optimizers/optimizer.h"
#include "zero/comm/communicator.h"
#include "zero/comm/local_communicator.h"
#include "zero/engine.h"

namespace zero {

// fn(i) for i in [0, n), each on a thread of its own, all at once; the first error.
absl::Status OnThreads(int n, const std::function<absl::Status(int)>& fn);

struct RankGroup {
  std::unique_ptr<DeviceSystem> devices;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::unique_ptr<Optimizer> adam;
  std::vector<std::unique_ptr<Engine>> engines;

  int size() const { return static_cast<int>(comms.size()); }
  // fn(rank) on a thread per rank. A rank that fails aborts its
  // communicator, so its peers fail at once instead of waiting for it at
  // their next collective. The first error (the engine's errors name the rank).
  absl::Status OnRanks(const std::function<absl::Status(int)>& fn);
};

// `ranks` host devices of `device_bytes` each, a local group over them with
// `comm`'s options, AdamW, and each rank's engine of `config` over `params`.
absl::StatusOr<std::unique_ptr<RankGroup>> MakeRankGroup(int ranks, size_t device_bytes,
                                                         const EngineConfig& config,
                                                         const std::vector<ParamSpec>& params,
                                                         const LocalGroupOptions& comm = {});

}  // namespace zero
