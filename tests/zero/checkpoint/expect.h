// What the checkpoint tests share: the model and run they use, and
// bit-for-bit comparisons of model states.
#pragma once

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/zero/checkpoint/cluster.h"
#include "tests/zero/test_util.h"

namespace zero::testing_model {

// Small enough to train in milliseconds; buckets of 300 elements make
// several units, so pieces cut through parameters at every world size.
inline std::unique_ptr<Model> SmallTransformer(int hidden = 16) {
  return *MakeTransformer(2, hidden, 2, 8, 2);
}

inline TrainingRun SmallRun(int world, int stage) {
  TrainingRun run;
  run.world = world;
  run.config.stage = stage;
  run.config.bucket_elements = 300;
  run.config.persistence_threshold = 0;  // stage 3 really shards every unit
  run.capacity = size_t{64} << 20;
  return run;
}

// FNV-1a over every bit of the states: equal hashes, equal states.
inline uint64_t Hash(const ModelStates& states) {
  uint64_t h = 1469598103934665603ull;
  for (const ParamSet& buffer : states)
    for (const std::vector<float>& param : buffer)
      for (float f : param) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        h = (h ^ bits) * 1099511628211ull;
      }
  return h;
}

inline void ExpectStatesIdentical(const ModelStates& expected, const ModelStates& actual,
                                  const std::string& who) {
  ASSERT_EQ(expected.size(), actual.size()) << who;
  for (size_t b = 0; b < expected.size(); ++b) {
    ExpectBitIdentical(expected[b], actual[b],
                       who + (b == 0 ? " master" : " state" + std::to_string(b - 1)));
  }
}

// Every rank's parameters equal `expected`.
inline void ExpectParamsOnEveryRank(const ParamSet& expected, Cluster& cluster,
                                    const std::string& who) {
  absl::StatusOr<std::vector<ParamSet>> params = cluster.Params();
  ASSERT_TRUE(params.ok()) << params.status();
  for (int r = 0; r < cluster.world(); ++r) {
    ExpectBitIdentical(expected, (*params)[r], who + ", rank " + std::to_string(r));
  }
}

}  // namespace zero::testing_model
