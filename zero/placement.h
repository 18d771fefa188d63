// Where each model state of one rank lives and how large it is: a pure
// function of the stage, offload, dtype and optimizer, computed once before
// anything is allocated. The engine allocates exactly this (one loop), and
// the ZeRO paper's per-rank formulas are tested against it without running
// an engine.
//
// Per rank, Ψ parameters over N ranks, model dtype of e bytes, k fp32 state
// buffers: stage 0 holds everything whole, 1 shards the optimizer state and
// master weights, 2 also the gradients, 3 also the parameters. With e = 2
// and Adam (k = 2) that is 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N and 16Ψ/N.
#pragma once

#include <array>
#include <cstddef>

#include "base/dtype.h"
#include "memory/tag.h"
#include "zero/config.h"

namespace zero {

// kNvme: a file on local storage (offload_device nvme), not memory.
enum class Home { kNone, kDevice, kHost, kNvme };

// The engine's model-state buffers.
enum class State {
  kParams,       // model dtype: whole (stages 0-2) or this rank's pieces (3)
  kMaster,       // fp32 master weights, when apart from the parameters
  kHostParams,   // offload with mixed precision (or NVMe): the CPU step's model-dtype pieces
  kGrads,        // whole flat gradients (stages 0-1)
  kOwnedGrads,   // this rank's reduced gradient pieces
  kOptimizer,    // each fp32 optimizer state buffer (state_buffers of them)
  kCount,
};

struct Placed {
  Home home = Home::kNone;
  size_t bytes = 0;  // per buffer (kOptimizer: each of `count`)
  int count = 0;     // buffers of this kind (0 when home is kNone)
  Tag tag = Tag::kOther;
};

struct Placement {
  std::array<Placed, static_cast<int>(State::kCount)> states;

  const Placed& operator[](State s) const { return states[static_cast<int>(s)]; }
  // Bytes of all states at `home`.
  size_t bytes(Home home) const;
  // What is kept in memory: the states in a file become kNone.
  Placement InMemory() const;
};

// `full` and `shard` are the padded flat and per-rank element counts
// (Layout::padded_numel, shard_numel). `config` must be valid.
Placement PlaceStates(const EngineConfig& config, int state_buffers, size_t full, size_t shard);

}  // namespace zero
