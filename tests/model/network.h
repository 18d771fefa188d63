// Machinery shared by the test models: the parameter/module registry, one
// pass's hook sequencing and gradient hand-off, and the layers that bind the
// kernels to registered parameters. Internal to tests/model.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/model/kernels.h"
#include "tests/model/model.h"

namespace zero::testing_model::internal {

template <typename T>
using Reader = std::function<std::span<const T>(int param)>;
template <typename T>
using GradSink = std::function<absl::Status(int param, std::span<const T> grad)>;

// SplitMix64: tiny, and its output is fixed by its definition (the standard
// distributions are not), so data and init are the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform(double bound);  // in [-bound, bound)

 private:
  uint64_t state_;
};

// n values uniform in [-bound, bound) from `seed`: batch data and teachers.
std::vector<float> UniformValues(uint64_t seed, size_t n, double bound);

// How a parameter starts: uniform in [-value, value), or all `value`.
struct InitRule {
  enum Kind { kUniform, kConstant } kind = kUniform;
  double value = 0;
};

struct Layout {
  std::vector<ParamInfo> params;
  std::vector<InitRule> init;  // per parameter
  std::vector<std::string> modules;
  std::vector<std::vector<int>> module_params;  // per module, registration order
};

// One micro-batch's forward and backward: reads parameters, holds their
// gradients until they are handed over, and fires the hooks in order.
template <typename T>
class Pass {
 public:
  Pass(const Layout& layout, Reader<T> read, const Hooks& hooks, GradSink<T> on_grad);

  // Asks the reader afresh: stage 3 may have moved the parameter since.
  absl::StatusOr<std::span<const T>> Param(int id) const;
  // Where backward writes a parameter's gradient; handed over (and freed)
  // when its module's backward returns.
  std::span<T> Grad(int id);

  using Step = absl::FunctionRef<absl::Status(int module)>;
  // forward(m) in order, then loss(), then backward(m) in reverse, each module
  // inside its hooks; returns the loss.
  absl::StatusOr<T> Run(Step forward, absl::FunctionRef<absl::StatusOr<T>()> loss, Step backward);

 private:
  absl::Status HandOverGrads(int module);

  const Layout& layout_;
  Reader<T> read_;
  const Hooks& hooks_;
  GradSink<T> on_grad_;
  std::vector<std::vector<T>> grads_;
};

// A dense layer's registered parameters; y = x W^T + b.
struct DenseLayer {
  int weight = -1, bias = -1;
  int in = 0, out = 0;

  template <typename T>
  absl::Status Forward(const Pass<T>& pass, int rows, std::span<const T> x, std::span<T> y) const;
  // dx may be empty.
  template <typename T>
  absl::Status Backward(Pass<T>& pass, int rows, std::span<const T> x, std::span<const T> dy,
                        std::span<T> dx) const;
};

// What a LayerNorm keeps from forward for backward.
template <typename T>
struct NormTape {
  std::vector<T> y, mean, rstd;
};

struct NormLayer {
  int gamma = -1, beta = -1;
  int dim = 0;

  template <typename T>
  absl::Status Forward(const Pass<T>& pass, int rows, std::span<const T> x,
                       NormTape<T>& tape) const;
  template <typename T>
  absl::Status Backward(Pass<T>& pass, int rows, std::span<const T> x, const NormTape<T>& tape,
                        std::span<const T> dy, std::span<T> dx) const;
};

// Base of both models: registry, init and the public entry points. A model
// derives from NetworkModelOf<Self> and defines
//   template <typename T> absl::StatusOr<T> Run(Pass<T>&, const Batch&) const;
class NetworkModel : public Model {
 public:
  const std::vector<ParamInfo>& params() const override { return layout_.params; }
  const std::vector<std::string>& modules() const override { return layout_.modules; }
  absl::Status InitParams(uint64_t seed, const ParamWriter& param) const override;

 protected:
  // Registration: parameters go to the module added last.
  void AddModule(std::string name);
  int AddParam(std::string name, std::vector<int64_t> shape, InitRule init);
  DenseLayer AddDense(const std::string& prefix, int in, int out);
  NormLayer AddNorm(const std::string& prefix, int dim);

  // Sizes a batch must have: per row of inputs and of targets.
  static absl::Status CheckBatch(const Batch& batch, size_t input_width, size_t target_width);

  const Layout& layout() const { return layout_; }

 private:
  Layout layout_;
};

template <class Derived>
class NetworkModelOf : public NetworkModel {
 public:
  absl::StatusOr<float> ForwardBackward(const ParamReader& params, const Batch& batch,
                                        const Hooks& hooks) const override {
    Pass<float> pass(layout(), params, hooks, hooks.on_grad);
    return self().Run(pass, batch);
  }

  absl::StatusOr<double> ForwardBackwardF64(
      const std::vector<std::vector<double>>& params, const Batch& batch,
      std::vector<std::vector<double>>* grads) const override {
    if (params.size() != layout().params.size()) {
      return absl::InvalidArgumentError("ForwardBackwardF64: wrong number of parameters");
    }
    if (grads != nullptr) grads->assign(params.size(), {});
    static const Hooks kNoHooks;
    Pass<double> pass(
        layout(), [&](int id) { return std::span<const double>(params[id]); }, kNoHooks,
        [&](int id, std::span<const double> g) {
          if (grads != nullptr) (*grads)[id].assign(g.begin(), g.end());
          return absl::OkStatus();
        });
    return self().Run(pass, batch);
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace zero::testing_model::internal
