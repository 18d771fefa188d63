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
// `comm`'s options (its devices: these, unless set), AdamW, and each rank's engine of `config` over `params`.
absl::StatusOr<std::unique_ptr<RankGroup>> MakeRankGroup(int ranks, size_t device_bytes,
                                                         const EngineConfig& config,
                                                         const std::vector<ParamSpec>& params,
                                                         const LocalGroupOptions& comm = {});

// GPT-style blocks: qkv, proj, fc1, fc2 weights and biases, hidden h
// (12 h^2 + 9 h elements a layer), a module per layer.
std::vector<ParamSpec> ModelSpecs(size_t h = 256, int layers = 4);

// One rank's step, as a loop runs it: layers fetched in order for forward,
// in reverse for backward, where gradients are handed over (`grad` for every
// parameter, at least as long as the largest). `peak` gets the largest count
// of gathered elements seen. With `forward` > 0 each layer's forward is that
// long a wait on the engine's stream and its backward twice that (a linear
// layer's backward computes the gradients of its input and of its weight:
// two products to forward's one), as the model's kernels would be; the host
// goes on at once, as with a card. Ends when the compute stream has run the
// step (a loop reads its loss once a step).
absl::Status RankStep(Engine& e, const std::vector<float>& grad, size_t& peak,
                      absl::Duration forward = absl::ZeroDuration());

}  // namespace zero
