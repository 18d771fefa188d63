#include "optimizers/loss_scaler.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/isa.h"
#include "compute/parallel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

LossScaler Make(const LossScalerConfig& config) {
  absl::StatusOr<LossScaler> s = LossScaler::Create(config);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LossScalerTest, DeepSpeedDefaults) {
  const LossScalerConfig c;
  EXPECT_EQ(c.initial_scale, 65536.0);
  EXPECT_EQ(c.growth_factor, 2.0);
  EXPECT_EQ(c.backoff_factor, 0.5);
  EXPECT_EQ(c.growth_interval, 1000);
  EXPECT_EQ(c.hysteresis, 2);
  EXPECT_EQ(c.min_scale, 1.0);
  LossScaler s = Make(c);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 65536.0f);
}

TEST(LossScalerTest, GrowsAfterIntervalOfGoodSteps) {
  LossScaler s = Make({.initial_scale = 8, .growth_interval = 3});
  EXPECT_FALSE(s.Update(false));
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), 8);
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), 16);
  for (int i = 0; i < 3; ++i) s.Update(false);
  EXPECT_EQ(s.scale(), 32);
}

TEST(LossScalerTest, HysteresisDelaysBackoffButAlwaysSkips) {
  LossScaler s = Make({.initial_scale = 1024, .growth_interval = 100, .hysteresis = 2});
  EXPECT_TRUE(s.Update(true));  // tolerated
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_TRUE(s.Update(true));  // backs off
  EXPECT_EQ(s.scale(), 512);
  EXPECT_TRUE(s.Update(true));  // tolerance is not refilled by backing off
  EXPECT_EQ(s.scale(), 256);
  EXPECT_FALSE(s.Update(false));  // a good step alone does not refill it either
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 128);
}

TEST(LossScalerTest, GrowthRefillsHysteresis) {
  LossScaler s = Make({.initial_scale = 64, .growth_interval = 2, .hysteresis = 2});
  s.Update(true);
  s.Update(true);
  EXPECT_EQ(s.scale(), 32);
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale(), 64);
  EXPECT_EQ(s.state().hysteresis_left, 2);
  s.Update(true);
  EXPECT_EQ(s.scale(), 64);
}

TEST(LossScalerTest, ConsecutiveHysteresisRefillsOnAnyGoodStep) {
  LossScaler s = Make({.initial_scale = 64,
                       .growth_interval = 100,
                       .hysteresis = 2,
                       .consecutive_hysteresis = true});
  s.Update(true);
  s.Update(false);
  s.Update(true);
  EXPECT_EQ(s.scale(), 64);
  s.Update(true);
  EXPECT_EQ(s.scale(), 32);
}

TEST(LossScalerTest, NeverBelowMinScaleAndOverflowResetsGrowth) {
  LossScaler s = Make({.initial_scale = 4, .growth_interval = 3, .hysteresis = 1, .min_scale = 2});
  s.Update(true);
  s.Update(true);
  s.Update(true);
  EXPECT_EQ(s.scale(), 2);
  s.Update(false);
  s.Update(false);
  s.Update(true);  // resets the run of good steps
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale(), 2);
  s.Update(false);
  EXPECT_EQ(s.scale(), 4);
}

// DeepSpeed's DynamicLossScaler.update_scale, transcribed (scale_factor
// both ways, as DeepSpeed has one factor).
struct DeepSpeedScaler {
  double cur_scale;
  int64_t cur_iter = 0, last_overflow_iter = -1, scale_window;
  int delayed_shift, cur_hysteresis;
  double min_scale;
  bool consecutive_hysteresis;

  void update_scale(bool overflow) {
    if (overflow) {
      if (delayed_shift == 1 || cur_hysteresis == 1) {
        cur_scale = std::max(cur_scale / 2.0, min_scale);
      } else {
        cur_hysteresis -= 1;
      }
      last_overflow_iter = cur_iter;
    } else {
      if (consecutive_hysteresis) cur_hysteresis = delayed_shift;
      if ((cur_iter - last_overflow_iter) % scale_window == 0) {
        if (!consecutive_hysteresis) cur_hysteresis = delayed_shift;
        cur_scale *= 2.0;
      }
    }
    cur_iter += 1;
  }
};

TEST(LossScalerTest, MatchesDeepSpeedOnLongRandomRuns) {
  for (bool consecutive : {false, true}) {
    for (int hysteresis : {1, 2, 3}) {
      LossScaler ours = Make({.initial_scale = 1024,
                              .growth_interval = 7,
                              .hysteresis = hysteresis,
                              .min_scale = 4,
                              .consecutive_hysteresis = consecutive});
      DeepSpeedScaler ds{1024, 0, -1, 7, hysteresis, hysteresis, 4, consecutive};
      std::mt19937 rng(hysteresis + 10 * consecutive);
      for (int i = 0; i < 5000; ++i) {
        const bool overflow = rng() % 6 == 0;
        EXPECT_EQ(ours.Update(overflow), overflow);
        ds.update_scale(overflow);
        ASSERT_EQ(ours.scale(), ds.cur_scale) << "iteration " << i;
      }
    }
  }
}

// DeepSpeed's raise_error_at_min_scale (on by default): the overflow that
// would back off a scale already at its minimum, with no hysteresis left,
// is an error; earlier ones are skipped steps; off, they stay skips.
TEST(LossScalerTest, AnOverflowAtTheMinimumScaleIsAnError) {
  LossScaler at_min = Make({.initial_scale = 4, .hysteresis = 2, .min_scale = 2});
  EXPECT_TRUE(at_min.CheckProgress(true).ok());  // spends hysteresis
  EXPECT_TRUE(at_min.Update(true));
  EXPECT_TRUE(at_min.CheckProgress(true).ok());  // backs off 4 -> 2
  EXPECT_TRUE(at_min.Update(true));
  EXPECT_EQ(at_min.scale(), 2.0);
  EXPECT_TRUE(at_min.CheckProgress(false).ok());
  const absl::Status stuck = at_min.CheckProgress(true);
  EXPECT_EQ(stuck.code(), absl::StatusCode::kFailedPrecondition) << stuck;
  EXPECT_NE(stuck.message().find("already at its minimum (2)"), std::string::npos) << stuck;

  LossScaler keeps_going = Make({.initial_scale = 2,
                                 .hysteresis = 1,
                                 .min_scale = 2,
                                 .raise_error_at_min_scale = false});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(keeps_going.CheckProgress(true).ok());
    EXPECT_TRUE(keeps_going.Update(true));
  }
}

TEST(LossScalerTest, BadConfigsAreInvalidArgument) {
  const std::vector<LossScalerConfig> bad = {
      {.initial_scale = 0},
      {.initial_scale = INFINITY},
      {.growth_factor = 0.5},
      {.backoff_factor = 0},
      {.backoff_factor = 1.5},
      {.growth_interval = 0},
      {.hysteresis = 0},
      {.min_scale = 0},
      {.initial_scale = 1, .min_scale = 2},
  };
  for (const LossScalerConfig& c : bad) {
    EXPECT_EQ(LossScaler::Create(c).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(LossScalerTest, StateRoundTrips) {
  LossScaler a = Make({.growth_interval = 10});
  a.Update(true);
  a.Update(false);
  LossScaler b = Make({.growth_interval = 10});
  ASSERT_TRUE(b.Restore(a.state()).ok());
  for (bool overflow : {false, true, true, false, false}) {
    EXPECT_EQ(a.Update(overflow), b.Update(overflow));
  }
  EXPECT_EQ(a.scale(), b.scale());
  for (const LossScaler::State& impossible :
       {LossScaler::State{.scale = 0, .good_steps = 0, .hysteresis_left = 1},
        LossScaler::State{.scale = std::nan(""), .good_steps = 0, .hysteresis_left = 1},
        LossScaler::State{.scale = 8, .good_steps = -1, .hysteresis_left = 1},
        LossScaler::State{.scale = 8, .good_steps = 0, .hysteresis_left = 0}}) {
    const absl::Status s = b.Restore(impossible);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("hysteresis_left"));
  }
}

// A run resumed with other scaler hyper-parameters (the caller's config, as
// checkpoint.h says) takes the saved state within the new limits: it was
// refused as a whole, naming nothing.
TEST(LossScalerTest, ARestoredStateIsBroughtWithinANewConfig) {
  LossScaler b = Make({.growth_interval = 10, .hysteresis = 2, .min_scale = 1});
  ASSERT_TRUE(b.Restore({.scale = 0.5, .good_steps = 25, .hysteresis_left = 3}).ok());
  EXPECT_EQ(b.state().scale, 1.0);
  EXPECT_EQ(b.state().good_steps, 9);
  EXPECT_EQ(b.state().hysteresis_left, 2);
  b.Update(false);
  EXPECT_EQ(b.scale(), 2.0) << "the next good step completes the cut growth interval";
}

// Every position (vector body and tail), every dtype, every SIMD level.
TEST(InfNanCheckTest, FindsEveryNonFiniteAndNothingElse) {
  const float inf = std::numeric_limits<float>::infinity();
  for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
    if (!cpu::IsSupported(isa)) continue;
    ASSERT_TRUE(cpu::SetCpuIsa(isa).ok());
    for (size_t n : {size_t{1}, size_t{17}, size_t{1500}, size_t{3000}}) {
      std::vector<float> f(n, 3e38f);        // huge but finite
      std::vector<bf16> b(n, bf16{0x7F7F});  // largest finite bf16
      std::vector<f16> h(n, f16{0x7BFF});    // 65504
      EXPECT_FALSE(HasInfOrNan(f));
      EXPECT_FALSE(HasInfOrNan(b));
      EXPECT_FALSE(HasInfOrNan(h));
      for (size_t i : {size_t{0}, n / 2, n - 1}) {
        f[i] = (i % 2) ? inf : std::nanf("");
        b[i] = bf16{static_cast<uint16_t>((i % 2) ? 0xFF80 : 0x7FC1)};
        h[i] = f16{static_cast<uint16_t>((i % 2) ? 0xFC00 : 0x7E00)};
        EXPECT_TRUE(HasInfOrNan(f)) << cpu::Name(isa) << " n " << n << " at " << i;
        EXPECT_TRUE(HasInfOrNan(b)) << cpu::Name(isa) << " n " << n << " at " << i;
        EXPECT_TRUE(HasInfOrNan(h)) << cpu::Name(isa) << " n " << n << " at " << i;
        f[i] = 3e38f;
        b[i] = bf16{0x7F7F};
        h[i] = f16{0x7BFF};
      }
    }
  }
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
}

TEST(InfNanCheckTest, LargeArraysAcrossThreads) {
  SetNumThreads(4);
  std::vector<float> x(1 << 20, 1.0f);
  EXPECT_FALSE(HasInfOrNan(x));
  x.back() = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(HasInfOrNan(x));
  SetNumThreads(0);
}

TEST(InfNanCheckTest, RawFormValidates) {
  const float x[2] = {1.0f, NAN};
  EXPECT_TRUE(*AnyInfOrNan(x, DType::kF32, 2));
  EXPECT_FALSE(*AnyInfOrNan(x, DType::kF32, 1));
  EXPECT_FALSE(*AnyInfOrNan(nullptr, DType::kF32, 0));
  EXPECT_EQ(AnyInfOrNan(nullptr, DType::kF32, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AnyInfOrNan(x, static_cast<DType>(5), 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zero
