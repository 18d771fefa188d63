// What the engine tests share: the optimizer they train with and the
// bit-for-bit comparison of parameter sets.
#pragma once

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "optimizers/adam.h"
#include "tests/zero/training.h"

namespace zero::testing_model {

inline OptimizerFactory AdamW() {
  return [] {
    AdamConfig config = AdamWDefaults();
    config.lr = 1e-2;
    config.weight_decay = 0.01;
    return MakeAdamW(config);
  };
}

inline void ExpectBitIdentical(const ParamSet& expected, const ParamSet& actual,
                               const std::string& who) {
  ASSERT_EQ(expected.size(), actual.size()) << who;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(expected[i].size(), actual[i].size()) << who << " param " << i;
    ASSERT_EQ(std::memcmp(expected[i].data(), actual[i].data(), expected[i].size() * 4), 0)
        << who << ": param " << i << " differs, e.g. " << expected[i][0] << " vs " << actual[i][0];
  }
}

// The offload tests' run: two ranks on the wide transformer's units
// (stage 3 gathers a few at a time), `capacity` bytes a device.
inline TrainingRun OffloadRun(int stage, Offload offload, size_t capacity) {
  TrainingRun run;
  run.world = 2;
  run.steps = 6;
  run.capacity = capacity;
  run.config.stage = stage;
  run.config.offload = offload;
  run.config.bucket_elements = 20'000;
  run.config.persistence_threshold = 0;
  run.config.prefetch_elements = 40'000;
  run.config.max_live_elements = 80'000;
  return run;
}

}  // namespace zero::testing_model
