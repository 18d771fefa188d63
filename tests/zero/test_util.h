// What the engine tests share: the optimizer they train with, the
// bit-for-bit comparison of parameter sets, and running without root's
// override of file permissions.
#pragma once

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// Root writes anywhere: until it goes, this thread (and the threads it
// starts, which inherit it) runs without the capabilities that override
// file permissions. Capabilities are per thread; the test's others keep theirs.
class WithoutPermissionOverride {
 public:
  WithoutPermissionOverride() {
    if (syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct dropped[2] = {saved_[0], saved_[1]};
    dropped[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    dropped_ = syscall(SYS_capset, &header_, dropped) == 0;
  }
  ~WithoutPermissionOverride() {
    if (dropped_) (void)syscall(SYS_capset, &header_, saved_);
  }
  // Whether this thread is now refused a new file in `folder` (mode 0555):
  // false where permissions are not enforced at all (skip the test there).
  static bool Refused(const std::string& folder) {
    const std::string probe = folder + "/probe";
    const int fd = open(probe.c_str(), O_CREAT | O_WRONLY, 0644);
    if (fd < 0) return true;
    close(fd);
    unlink(probe.c_str());
    return false;
  }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2] = {};
  bool dropped_ = false;
};

}  // namespace zero::testing_model
