// Gradients against central finite differences, for every element of every
// parameter of both models. The check runs in double (ForwardBackwardF64,
// the same templated code) so its tolerance can be tight; a second check ties
// the fp32 path to the double one.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/model.h"

namespace zero::testing_model {
namespace {

using Params64 = std::vector<std::vector<double>>;

struct Case {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<Model>>()> make;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Small sizes: every element is perturbed twice.
std::vector<Case> Cases() {
  auto tf = [](bool causal, Activation act, int layers) {
    return [=] {
      return MakeTransformer({.layers = layers,
                              .hidden = 8,
                              .heads = 2,
                              .seq = 4,
                              .rows = 2,
                              .features = 3,
                              .causal = causal,
                              .activation = act});
    };
  };
  return {
      {"Mlp", [] { return MakeMlp(3, 5, 2, 4); }},
      {"TransformerCausalGelu", tf(true, Activation::kGelu, 2)},
      {"TransformerFullRelu", tf(false, Activation::kRelu, 1)},
  };
}

class GradientTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto model = GetParam().make();
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    auto params = InitialParams(*model_, 5);
    ASSERT_TRUE(params.ok()) << params.status();
    // Jitter everything, LayerNorm's gamma = 1 and beta = 0 included, so a
    // gradient that forgot a factor of gamma cannot pass by luck.
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> jitter(-0.3, 0.3);
    for (const std::vector<float>& p : *params) {
      params64_.emplace_back();
      for (float v : p) params64_.back().push_back(static_cast<double>(v) + jitter(rng));
    }
    batch_ = model_->MakeBatch(9);
  }

  double Loss(const Params64& params) const {
    auto loss = model_->ForwardBackwardF64(params, batch_, nullptr);
    EXPECT_TRUE(loss.ok()) << loss.status();
    return loss.value_or(0);
  }

  std::unique_ptr<Model> model_;
  Params64 params64_;
  Batch batch_;
};

TEST_P(GradientTest, MatchesFiniteDifferences) {
  Params64 grads;
  ASSERT_TRUE(model_->ForwardBackwardF64(params64_, batch_, &grads).ok());
  constexpr double kStep = 1e-6;
  Params64 probe = params64_;
  for (size_t id = 0; id < probe.size(); ++id) {
    const std::string& name = model_->params()[id].name;
    ASSERT_EQ(grads[id].size(), probe[id].size()) << name;
    double largest = 0;
    for (size_t i = 0; i < probe[id].size(); ++i) {
      const double saved = probe[id][i];
      probe[id][i] = saved + kStep;
      const double up = Loss(probe);
      probe[id][i] = saved - kStep;
      const double down = Loss(probe);
      probe[id][i] = saved;
      const double numeric = (up - down) / (2 * kStep);
      EXPECT_NEAR(grads[id][i], numeric, 1e-7 + 1e-5 * std::abs(numeric))
          << name << "[" << i << "]";
      largest = std::max(largest, std::abs(numeric));
    }
    EXPECT_GT(largest, 1e-6) << name << ": a gradient of all zeros checks nothing";
  }
}

// The fp32 path is the same code as the double one, so the two differ by
// rounding alone.
TEST_P(GradientTest, Fp32MatchesDouble) {
  ParamSet params32;
  for (const auto& p : params64_) params32.emplace_back(p.begin(), p.end());
  Params64 rounded, grads64;
  for (const auto& p : params32) rounded.emplace_back(p.begin(), p.end());
  auto loss64 = model_->ForwardBackwardF64(rounded, batch_, &grads64);
  ParamSet grads32;
  auto loss32 = ForwardBackwardDense(*model_, params32, batch_, &grads32);
  ASSERT_TRUE(loss64.ok() && loss32.ok());
  EXPECT_NEAR(*loss32, *loss64, 1e-5 * *loss64);
  for (size_t id = 0; id < grads64.size(); ++id) {
    double scale = 0;
    for (double g : grads64[id]) scale = std::max(scale, std::abs(g));
    for (size_t i = 0; i < grads64[id].size(); ++i) {
      EXPECT_NEAR(grads32[id][i], grads64[id][i], 1e-4 * scale)
          << model_->params()[id].name << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GradientTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace zero::testing_model
