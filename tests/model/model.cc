// The model-independent helpers declared in model.h.
#include "tests/model/model.h"

#include "base/status_macros.h"
#include "tests/model/network.h"

namespace zero::testing_model {

uint64_t MixSeed(uint64_t a, uint64_t b) {
  // Two SplitMix rounds, so MixSeed(a, b) and MixSeed(b, a) differ.
  internal::Rng first(a);
  internal::Rng second(first.Next() ^ b);
  return second.Next();
}

size_t TotalNumel(const Model& model) {
  size_t total = 0;
  for (const ParamInfo& p : model.params()) total += p.numel;
  return total;
}

absl::StatusOr<ParamSet> InitialParams(const Model& model, uint64_t seed) {
  ParamSet params;
  for (const ParamInfo& p : model.params()) params.emplace_back(p.numel);
  RETURN_IF_ERROR(model.InitParams(seed, [&](int id) { return std::span<float>(params[id]); }));
  return params;
}

absl::StatusOr<float> ForwardBackwardDense(const Model& model, const ParamSet& params,
                                           const Batch& batch, ParamSet* grads) {
  if (params.size() != model.params().size()) {
    return absl::InvalidArgumentError("ForwardBackwardDense: wrong number of parameters");
  }
  Hooks hooks;
  if (grads != nullptr) {
    grads->assign(params.size(), {});
    hooks.on_grad = [grads](int id, std::span<const float> g) {
      (*grads)[id].assign(g.begin(), g.end());
      return absl::OkStatus();
    };
  }
  return model.ForwardBackward([&](int id) { return std::span<const float>(params[id]); }, batch,
                               hooks);
}

}  // namespace zero::testing_model
