#include "tests/model/network.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace zero::testing_model::internal {
namespace {

absl::Status CallHook(const std::function<absl::Status(int)>& hook, int module) {
  return hook ? hook(module) : absl::OkStatus();
}

}  // namespace

uint64_t Rng::Next() {
  state_ += 0x9e3779b97f4a7c15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::Uniform(double bound) {
  const double unit = static_cast<double>(Next() >> 11) * 0x1.0p-53;  // [0, 1)
  return (2 * unit - 1) * bound;
}

std::vector<float> UniformValues(uint64_t seed, size_t n, double bound) {
  Rng rng(seed);
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(rng.Uniform(bound));
  return values;
}

template <typename T>
Pass<T>::Pass(const Layout& layout, Reader<T> read, const Hooks& hooks, GradSink<T> on_grad)
    : layout_(layout),
      read_(std::move(read)),
      hooks_(hooks),
      on_grad_(std::move(on_grad)),
      grads_(layout.params.size()) {}

template <typename T>
absl::StatusOr<std::span<const T>> Pass<T>::Param(int id) const {
  const ParamInfo& info = layout_.params[id];
  std::span<const T> values = read_(id);
  if (values.size() != info.numel) {
    return absl::FailedPreconditionError(absl::StrCat("parameter ", info.name, " read as ",
                                                      values.size(), " values, not ", info.numel,
                                                      " (not gathered?)"));
  }
  return values;
}

template <typename T>
std::span<T> Pass<T>::Grad(int id) {
  grads_[id].assign(layout_.params[id].numel, T(0));
  return grads_[id];
}

template <typename T>
absl::StatusOr<T> Pass<T>::Run(Step forward, absl::FunctionRef<absl::StatusOr<T>()> loss,
                               Step backward) {
  const int n = static_cast<int>(layout_.modules.size());
  for (int m = 0; m < n; ++m) {
    RETURN_IF_ERROR(CallHook(hooks_.pre_forward, m));
    RETURN_IF_ERROR(forward(m));
    RETURN_IF_ERROR(CallHook(hooks_.post_forward, m));
  }
  ASSIGN_OR_RETURN(const T value, loss());
  for (int m = n - 1; m >= 0; --m) {
    RETURN_IF_ERROR(CallHook(hooks_.pre_backward, m));
    RETURN_IF_ERROR(backward(m));
    RETURN_IF_ERROR(HandOverGrads(m));
    RETURN_IF_ERROR(CallHook(hooks_.post_backward, m));
  }
  return value;
}

template <typename T>
absl::Status Pass<T>::HandOverGrads(int module) {
  const std::vector<int>& ids = layout_.module_params[module];
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    std::vector<T>& grad = grads_[*it];
    if (grad.size() != layout_.params[*it].numel) {
      return absl::InternalError(absl::StrCat("module ", layout_.modules[module],
                                              " computed no gradient for ",
                                              layout_.params[*it].name));
    }
    if (on_grad_) RETURN_IF_ERROR(on_grad_(*it, grad));
    std::vector<T>().swap(grad);  // the span given out dies here, as documented
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status DenseLayer::Forward(const Pass<T>& pass, int rows, std::span<const T> x,
                                 std::span<T> y) const {
  ASSIGN_OR_RETURN(std::span<const T> w, pass.Param(weight));
  ASSIGN_OR_RETURN(std::span<const T> b, pass.Param(bias));
  Linear<T>({rows, in, out}, x, w, b, y);
  return absl::OkStatus();
}

template <typename T>
absl::Status DenseLayer::Backward(Pass<T>& pass, int rows, std::span<const T> x,
                                  std::span<const T> dy, std::span<T> dx) const {
  ASSIGN_OR_RETURN(std::span<const T> w, pass.Param(weight));
  LinearBackward<T>({rows, in, out}, x, w, dy, dx, pass.Grad(weight), pass.Grad(bias));
  return absl::OkStatus();
}

template <typename T>
absl::Status NormLayer::Forward(const Pass<T>& pass, int rows, std::span<const T> x,
                                NormTape<T>& tape) const {
  ASSIGN_OR_RETURN(std::span<const T> g, pass.Param(gamma));
  ASSIGN_OR_RETURN(std::span<const T> b, pass.Param(beta));
  tape.y.resize(x.size());
  tape.mean.resize(rows);
  tape.rstd.resize(rows);
  LayerNorm<T>(rows, dim, x, g, b, tape.y, tape.mean, tape.rstd);
  return absl::OkStatus();
}

template <typename T>
absl::Status NormLayer::Backward(Pass<T>& pass, int rows, std::span<const T> x,
                                 const NormTape<T>& tape, std::span<const T> dy,
                                 std::span<T> dx) const {
  ASSIGN_OR_RETURN(std::span<const T> g, pass.Param(gamma));
  LayerNormBackward<T>(rows, dim, x, g, tape.mean, tape.rstd, dy, dx, pass.Grad(gamma),
                       pass.Grad(beta));
  return absl::OkStatus();
}

absl::Status NetworkModel::InitParams(uint64_t seed, const ParamWriter& param) const {
  for (size_t id = 0; id < layout_.params.size(); ++id) {
    const ParamInfo& info = layout_.params[id];
    std::span<float> values = param(static_cast<int>(id));
    if (values.size() != info.numel) {
      return absl::InvalidArgumentError(absl::StrCat("InitParams: ", info.name, " has ",
                                                     values.size(), " slots, not ", info.numel));
    }
    const InitRule& rule = layout_.init[id];
    Rng rng(MixSeed(seed, id));
    for (float& v : values) {
      v = static_cast<float>(rule.kind == InitRule::kUniform ? rng.Uniform(rule.value)
                                                             : rule.value);
    }
  }
  return absl::OkStatus();
}

void NetworkModel::AddModule(std::string name) {
  layout_.modules.push_back(std::move(name));
  layout_.module_params.emplace_back();
}

int NetworkModel::AddParam(std::string name, std::vector<int64_t> shape, InitRule init) {
  size_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<size_t>(d);
  const int id = static_cast<int>(layout_.params.size());
  const int module = static_cast<int>(layout_.modules.size()) - 1;
  layout_.params.push_back({std::move(name), std::move(shape), numel, module});
  layout_.init.push_back(init);
  layout_.module_params[module].push_back(id);
  return id;
}

DenseLayer NetworkModel::AddDense(const std::string& prefix, int in, int out) {
  // torch's default: both uniform in +-1/sqrt(fan_in).
  const InitRule rule{InitRule::kUniform, 1.0 / std::sqrt(static_cast<double>(in))};
  DenseLayer layer{.in = in, .out = out};
  layer.weight = AddParam(prefix + ".weight", {out, in}, rule);
  layer.bias = AddParam(prefix + ".bias", {out}, rule);
  return layer;
}

NormLayer NetworkModel::AddNorm(const std::string& prefix, int dim) {
  NormLayer layer{.dim = dim};
  layer.gamma = AddParam(prefix + ".gamma", {dim}, {InitRule::kConstant, 1.0});
  layer.beta = AddParam(prefix + ".beta", {dim}, {InitRule::kConstant, 0.0});
  return layer;
}

absl::Status NetworkModel::CheckBatch(const Batch& batch, size_t input_width, size_t target_width) {
  const size_t rows = batch.rows > 0 ? static_cast<size_t>(batch.rows) : 0;
  if (rows == 0 || batch.inputs.size() != rows * input_width ||
      batch.targets.size() != rows * target_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", batch.rows, " rows has ", batch.inputs.size(), " inputs and ",
        batch.targets.size(), " targets; want ", input_width, " and ", target_width, " per row"));
  }
  return absl::OkStatus();
}

#define ZERO_MODEL_NETWORK_(T)                                                                 \
  template class Pass<T>;                                                                      \
  template absl::Status DenseLayer::Forward<T>(const Pass<T>&, int, std::span<const T>,        \
                                               std::span<T>) const;                            \
  template absl::Status DenseLayer::Backward<T>(Pass<T>&, int, std::span<const T>,             \
                                                std::span<const T>, std::span<T>) const;       \
  template absl::Status NormLayer::Forward<T>(const Pass<T>&, int, std::span<const T>,         \
                                              NormTape<T>&) const;                             \
  template absl::Status NormLayer::Backward<T>(                                                \
      Pass<T>&, int, std::span<const T>, const NormTape<T>&, std::span<const T>, std::span<T>) \
      const;

ZERO_MODEL_NETWORK_(float)
ZERO_MODEL_NETWORK_(double)
#undef ZERO_MODEL_NETWORK_

}  // namespace zero::testing_model::internal
