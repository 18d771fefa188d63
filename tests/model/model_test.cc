// The model contract the engine relies on: hook order, gradients handed over
// once each in reverse registration order, parameters read afresh per module,
// bit-for-bit determinism, errors, and that SGD on it actually learns.
#include "tests/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero::testing_model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Case {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<Model>>()> make;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  return {
      {"Mlp", [] { return MakeMlp(16, 32, 8, 8); }},
      {"Transformer", [] { return MakeTransformer(2, 16, 2, 8, 2); }},
      {"TransformerFullRelu",
       [] {
         return MakeTransformer({.layers = 1,
                                 .hidden = 8,
                                 .heads = 4,
                                 .seq = 5,
                                 .rows = 3,
                                 .features = 3,
                                 .causal = false,
                                 .activation = Activation::kRelu});
       }},
  };
}

class ModelTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto model = GetParam().make();
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    auto params = InitialParams(*model_, 42);
    ASSERT_TRUE(params.ok()) << params.status();
    params_ = *std::move(params);
    batch_ = model_->MakeBatch(MixSeed(3, 4));
  }

  ParamReader Dense() const {
    return [this](int id) { return std::span<const float>(params_[id]); };
  }

  std::unique_ptr<Model> model_;
  ParamSet params_;
  Batch batch_;
};

// Records every hook as text, e.g. "pre_forward fc1" or "grad fc1.bias".
Hooks Recorder(const Model& model, std::vector<std::string>& events) {
  auto module_hook = [&](const char* what) {
    return [&model, &events, what](int m) {
      events.push_back(absl::StrCat(what, " ", model.modules()[m]));
      return absl::OkStatus();
    };
  };
  Hooks hooks;
  hooks.pre_forward = module_hook("pre_forward");
  hooks.post_forward = module_hook("post_forward");
  hooks.pre_backward = module_hook("pre_backward");
  hooks.post_backward = module_hook("post_backward");
  hooks.on_grad = [&model, &events](int id, std::span<const float> grad) {
    EXPECT_EQ(grad.size(), model.params()[id].numel);
    events.push_back("grad " + model.params()[id].name);
    return absl::OkStatus();
  };
  return hooks;
}

std::vector<std::string> ExpectedEvents(const Model& model) {
  std::vector<std::string> events;
  const auto& modules = model.modules();
  for (const std::string& m : modules) {
    events.push_back("pre_forward " + m);
    events.push_back("post_forward " + m);
  }
  for (int m = static_cast<int>(modules.size()) - 1; m >= 0; --m) {
    events.push_back("pre_backward " + modules[m]);
    for (int id = static_cast<int>(model.params().size()) - 1; id >= 0; --id) {
      if (model.params()[id].module == m) events.push_back("grad " + model.params()[id].name);
    }
    events.push_back("post_backward " + modules[m]);
  }
  return events;
}

TEST_P(ModelTest, ModulesOwnContiguousParamsInOrder) {
  int last = 0;
  size_t total = 0;
  for (const ParamInfo& p : model_->params()) {
    EXPECT_GE(p.module, last) << p.name;
    EXPECT_LT(p.module, static_cast<int>(model_->modules().size())) << p.name;
    last = p.module;
    size_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    EXPECT_EQ(numel, p.numel) << p.name;
    total += p.numel;
  }
  EXPECT_EQ(total, TotalNumel(*model_));
}

TEST_P(ModelTest, HooksFireInOrder) {
  std::vector<std::string> events;
  auto loss = model_->ForwardBackward(Dense(), batch_, Recorder(*model_, events));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(events, ExpectedEvents(*model_));
}

TEST_P(ModelTest, EmptyHooksAreNoOps) {
  auto loss = model_->ForwardBackward(Dense(), batch_, Hooks{});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_GT(*loss, 0.0f);
}

// Every hook, failing at every module (or parameter), stops the pass there.
TEST_P(ModelTest, HookErrorAbortsAndIsReturned) {
  const std::vector<std::string> all = ExpectedEvents(*model_);
  for (size_t fail_at = 0; fail_at < all.size(); ++fail_at) {
    std::vector<std::string> events;
    Hooks hooks = Recorder(*model_, events);
    // Wrap each hook so the fail_at-th event returns an error after recording.
    auto fail = [&](auto inner) {
      return [&events, fail_at, inner](auto... args) -> absl::Status {
        absl::Status s = inner(args...);
        if (events.size() == fail_at + 1) return absl::AbortedError("boom");
        return s;
      };
    };
    hooks.pre_forward = fail(hooks.pre_forward);
    hooks.post_forward = fail(hooks.post_forward);
    hooks.pre_backward = fail(hooks.pre_backward);
    hooks.post_backward = fail(hooks.post_backward);
    hooks.on_grad = fail(hooks.on_grad);
    auto loss = model_->ForwardBackward(Dense(), batch_, hooks);
    EXPECT_EQ(loss.status(), absl::AbortedError("boom")) << all[fail_at];
    EXPECT_EQ(events, std::vector<std::string>(all.begin(), all.begin() + fail_at + 1));
  }
}

TEST_P(ModelTest, BitForBitDeterministic) {
  ParamSet g1, g2;
  auto l1 = ForwardBackwardDense(*model_, params_, batch_, &g1);
  auto l2 = ForwardBackwardDense(*model_, params_, batch_, &g2);
  ASSERT_TRUE(l1.ok() && l2.ok());
  EXPECT_EQ(std::memcmp(&*l1, &*l2, sizeof(float)), 0);
  ASSERT_EQ(g1.size(), model_->params().size());
  for (size_t id = 0; id < g1.size(); ++id) {
    ASSERT_EQ(g1[id].size(), model_->params()[id].numel);
    EXPECT_EQ(std::memcmp(g1[id].data(), g2[id].data(), g1[id].size() * sizeof(float)), 0)
        << model_->params()[id].name;
  }
}

// Ranks run as threads over one shared model.
TEST_P(ModelTest, ConcurrentCallsAgree) {
  ParamSet expected;
  ASSERT_TRUE(ForwardBackwardDense(*model_, params_, batch_, &expected).ok());
  std::vector<ParamSet> grads(4);
  std::vector<std::thread> threads;
  for (ParamSet& g : grads) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i)
        EXPECT_TRUE(ForwardBackwardDense(*model_, params_, batch_, &g).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  for (const ParamSet& g : grads) EXPECT_EQ(g, expected);
}

// Like stage 3: a module's parameters exist only between its pre_* and post_*
// hooks, each time in a fresh buffer, and are poisoned when released. The
// model must read them afresh and get exactly the dense result.
TEST_P(ModelTest, ReadsParamsAfreshEachModule) {
  const Model& model = *model_;
  std::map<int, std::unique_ptr<std::vector<float>>> gathered;
  auto gather = [&](int m) {
    for (size_t id = 0; id < params_.size(); ++id) {
      if (model.params()[id].module == m) {
        gathered[id] = std::make_unique<std::vector<float>>(params_[id]);
      }
    }
    return absl::OkStatus();
  };
  auto release = [&](int m) {
    for (auto it = gathered.begin(); it != gathered.end();) {
      if (model.params()[it->first].module != m) {
        ++it;
        continue;
      }
      std::fill(it->second->begin(), it->second->end(), std::nanf(""));
      it = gathered.erase(it);
    }
    return absl::OkStatus();
  };
  ParamSet grads(params_.size());
  Hooks hooks;
  hooks.pre_forward = hooks.pre_backward = gather;
  hooks.post_forward = hooks.post_backward = release;
  hooks.on_grad = [&](int id, std::span<const float> g) {
    grads[id].assign(g.begin(), g.end());
    return absl::OkStatus();
  };
  ParamReader reader = [&](int id) -> std::span<const float> {
    auto it = gathered.find(id);
    return it == gathered.end() ? std::span<const float>() : *it->second;
  };
  auto loss = model.ForwardBackward(reader, batch_, hooks);
  ASSERT_TRUE(loss.ok()) << loss.status();
  ParamSet dense_grads;
  auto dense_loss = ForwardBackwardDense(model, params_, batch_, &dense_grads);
  ASSERT_TRUE(dense_loss.ok());
  EXPECT_EQ(std::memcmp(&*loss, &*dense_loss, sizeof(float)), 0);
  for (size_t id = 0; id < grads.size(); ++id) {
    EXPECT_EQ(std::memcmp(grads[id].data(), dense_grads[id].data(), grads[id].size() * 4), 0)
        << model.params()[id].name;
  }
}

TEST_P(ModelTest, MissingParamIsAnError) {
  const int last = static_cast<int>(params_.size()) - 1;
  ParamReader reader = [&](int id) {
    return id == last ? std::span<const float>() : std::span<const float>(params_[id]);
  };
  auto loss = model_->ForwardBackward(reader, batch_, Hooks{});
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(loss.status().message(), HasSubstr(model_->params()[last].name));
}

TEST_P(ModelTest, MisshapenBatchIsAnError) {
  Batch bad = batch_;
  bad.targets.pop_back();
  EXPECT_EQ(model_->ForwardBackward(Dense(), bad, Hooks{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = batch_;
  bad.rows = 0;
  EXPECT_EQ(model_->ForwardBackward(Dense(), bad, Hooks{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(ModelTest, InitAndBatchesDependOnSeedAlone) {
  auto again = InitialParams(*model_, 42);
  auto other = InitialParams(*model_, 43);
  ASSERT_TRUE(again.ok() && other.ok());
  EXPECT_EQ(*again, params_);
  EXPECT_NE(*other, params_);
  const Batch same = model_->MakeBatch(MixSeed(3, 4));
  EXPECT_EQ(same.inputs, batch_.inputs);
  EXPECT_EQ(same.targets, batch_.targets);
  EXPECT_NE(model_->MakeBatch(MixSeed(4, 3)).inputs, batch_.inputs);
}

TEST_P(ModelTest, InitChecksSlotSizes) {
  std::vector<float> tiny(1);
  auto status = model_->InitParams(1, [&](int) { return std::span<float>(tiny); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

// Plain SGD on fresh batches: the loss over the last steps is well below the
// first steps', so the gradients point downhill and the data is learnable.
TEST_P(ModelTest, SgdLowersTheLoss) {
  constexpr int kSteps = 50;
  constexpr float kLr = 0.5f;  // fastest that stays stable on every case
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    ParamSet grads;
    auto loss = ForwardBackwardDense(*model_, params_, model_->MakeBatch(MixSeed(7, step)), &grads);
    ASSERT_TRUE(loss.ok()) << loss.status();
    losses.push_back(*loss);
    for (size_t id = 0; id < params_.size(); ++id) {
      for (size_t i = 0; i < params_[id].size(); ++i) params_[id][i] -= kLr * grads[id][i];
    }
  }
  auto mean = [](auto begin, auto end) {
    float sum = 0;
    for (auto it = begin; it != end; ++it) sum += *it;
    return sum / static_cast<float>(end - begin);
  };
  const float first = mean(losses.begin(), losses.begin() + 5);
  const float last = mean(losses.end() - 5, losses.end());
  EXPECT_LT(last, 0.5f * first) << "first " << first << " last " << last;
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(LayoutTest, MlpNames) {
  auto model = MakeMlp(3, 5, 2, 4);
  ASSERT_TRUE(model.ok());
  EXPECT_THAT((*model)->modules(), ElementsAre("fc1", "fc2"));
  std::vector<std::string> names;
  for (const ParamInfo& p : (*model)->params()) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"));
  EXPECT_THAT((*model)->params()[0].shape, ElementsAre(5, 3));
}

TEST(LayoutTest, TransformerModules) {
  auto model = MakeTransformer(2, 16, 2, 8, 2);
  ASSERT_TRUE(model.ok());
  EXPECT_THAT((*model)->modules(),
              ElementsAre("embed", "layer0.ln1", "layer0.attn", "layer0.ln2", "layer0.mlp",
                          "layer1.ln1", "layer1.attn", "layer1.ln2", "layer1.mlp", "head"));
  std::vector<std::string> attn;
  for (const ParamInfo& p : (*model)->params()) {
    if (p.module == 2) attn.push_back(p.name);
  }
  EXPECT_THAT(attn, ElementsAre("layer0.attn.qkv.weight", "layer0.attn.qkv.bias",
                                "layer0.attn.proj.weight", "layer0.attn.proj.bias"));
}

TEST(LayoutTest, BadSizesAreErrors) {
  EXPECT_EQ(MakeMlp(0, 5, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeTransformer(2, 15, 2, 8, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zero::testing_model
