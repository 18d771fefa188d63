// Small, exactly deterministic models for the engine tests.
//
// The engine tests run the same training under ZeRO stages 0-3 over ranks as
// threads and compare the results bit for bit, so everything here is plain
// fp32 loops in a fixed order on one thread: a result depends only on the
// parameters and the batch. The models call back into the engine while they
// run (Hooks) so stage 3 can gather and release a module's parameters and the
// gradient buckets can reduce as soon as backward produces each gradient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/model/kernels.h"

namespace zero::testing_model {

struct ParamInfo {
  std::string name;            // e.g. "layer0.attn.qkv.weight"
  std::vector<int64_t> shape;  // row-major; weights are [out, in]
  size_t numel = 0;
  int module = 0;  // index into Model::modules()
};

// One micro-batch. `rows` samples (MLP) or sequences (transformer); the
// per-row widths are fixed by the model that made it.
struct Batch {
  std::vector<float> inputs;
  std::vector<float> targets;
  int rows = 0;
};

// Called by the model while it runs. Every member may be left empty (no-op).
// Order for one micro-batch: for each module m in forward order
// pre_forward(m), compute, post_forward(m); then for each module in reverse
// pre_backward(m), compute, on_grad for m's parameters in reverse
// registration order, post_backward(m). An error from any hook aborts the
// pass and is returned from ForwardBackward.
struct Hooks {
  std::function<absl::Status(int module)> pre_forward, post_forward;
  std::function<absl::Status(int module)> pre_backward, post_backward;
  // Once per parameter per micro-batch, as soon as its gradient is final.
  // The span is valid only during the call.
  std::function<absl::Status(int param, std::span<const float> grad)> on_grad;
};

// How the model reads a parameter. Stage 3 gathers on demand, so a span may
// move between calls: the model asks again in every module's forward and
// backward (after the pre_* hook) and never keeps one. A span whose size is
// not the parameter's numel (e.g. empty: not gathered) is an error.
using ParamReader = std::function<std::span<const float>(int param)>;
using ParamWriter = std::function<std::span<float>(int param)>;

// Every method is const and keeps nothing between calls, so ranks running as
// threads may share one Model.
class Model {
 public:
  virtual ~Model() = default;

  // Registration order is forward order; a module's parameters are contiguous.
  virtual const std::vector<ParamInfo>& params() const = 0;
  virtual const std::vector<std::string>& modules() const = 0;

  // Fills every parameter from `seed` alone (each from its own stream, so the
  // values do not depend on the order the engine stores them in).
  virtual absl::Status InitParams(uint64_t seed, const ParamWriter& param) const = 0;

  // Deterministic data for a seed (see MixSeed), with targets from a fixed
  // teacher so training can actually fit them.
  virtual Batch MakeBatch(uint64_t seed) const = 0;

  // Forward and backward of one micro-batch; returns the mean squared error.
  // Gradients (of that loss) go only to hooks.on_grad.
  virtual absl::StatusOr<float> ForwardBackward(const ParamReader& params, const Batch& batch,
                                                const Hooks& hooks) const = 0;

  // The same computation in double, for gradient checks. `params` are in
  // registration order; `grads`, when given, is filled likewise.
  virtual absl::StatusOr<double> ForwardBackwardF64(
      const std::vector<std::vector<double>>& params, const Batch& batch,
      std::vector<std::vector<double>>* grads) const = 0;
};

// 2 layers: modules "fc1" (weight [hidden, in], bias, then ReLU) and "fc2"
// (weight [out, hidden], bias). Inputs [rows, in], targets [rows, out].
absl::StatusOr<std::unique_ptr<Model>> MakeMlp(int in, int hidden, int out, int rows);

struct TransformerConfig {
  int layers = 2;
  int hidden = 16;
  int heads = 2;
  int seq = 8;
  int rows = 2;       // sequences per batch
  int features = 16;  // width of each input and target token
  bool causal = true;
  Activation activation = Activation::kGelu;
};

// Pre-LayerNorm transformer. Modules: "embed" (input projection + learned
// positions), then per layer "layerL.ln1", "layerL.attn" (qkv and output
// projection, residual add), "layerL.ln2", "layerL.mlp" (fc1 to 4*hidden,
// activation, fc2, residual add), then "head" (projection to features).
// Inputs and targets are [rows, seq, features].
absl::StatusOr<std::unique_ptr<Model>> MakeTransformer(const TransformerConfig& config);
// features = hidden, causal, GELU.
absl::StatusOr<std::unique_ptr<Model>> MakeTransformer(int layers, int hidden, int heads, int seq,
                                                       int rows);

// Combines seeds, e.g. MixSeed(MixSeed(rank, step), micro); well spread, so
// neighbouring inputs give unrelated batches.
uint64_t MixSeed(uint64_t a, uint64_t b);

// Plain single-process helpers, one vector per parameter: the reference an
// engine's results are compared with, and the tests' own driver.
using ParamSet = std::vector<std::vector<float>>;
size_t TotalNumel(const Model& model);
absl::StatusOr<ParamSet> InitialParams(const Model& model, uint64_t seed);
// Overwrites *grads (one vector per parameter) when given.
absl::StatusOr<float> ForwardBackwardDense(const Model& model, const ParamSet& params,
                                           const Batch& batch, ParamSet* grads);

}  // namespace zero::testing_model
