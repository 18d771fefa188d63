#include "footprint/model.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"

namespace zero::footprint {
namespace {

// 16 bytes a parameter (mixed-precision Adam's states) must fit in 64 bits
// (4 x 2^62 bytes of fp32 wrapped to 0).
constexpr uint64_t kMaxNumel = uint64_t{1} << 58;

}  // namespace

uint64_t ParamShape::numel() const {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d == 0) return 0;
    if (n > kMaxNumel / d) return kMaxNumel + 1;  // saturated: Validate rejects it
    n *= d;
  }
  return n;
}

uint64_t ModuleSpec::numel() const {
  uint64_t n = 0;
  for (const ParamShape& p : params) n += p.numel();
  return n;
}

uint64_t ModelSpec::numel() const {
  uint64_t n = 0;
  for (const ModuleSpec& m : modules) n += m.numel();
  return n;
}

uint64_t ModelSpec::largest_module_numel() const {
  uint64_t n = 0;
  for (const ModuleSpec& m : modules) n = std::max(n, m.numel());
  return n;
}

std::vector<int> ModelSpec::ForwardOrder() const {
  if (!forward.empty()) return forward;
  std::vector<int> order(modules.size());
  for (size_t m = 0; m < modules.size(); ++m) order[m] = static_cast<int>(m);
  return order;
}

std::vector<ParamSpec> ModelSpec::ToParamSpecs() const {
  std::vector<ParamSpec> specs;
  for (size_t m = 0; m < modules.size(); ++m) {
    for (const ParamShape& p : modules[m].params) {
      specs.push_back({modules[m].name + "." + p.name, p.numel(), static_cast<int>(m)});
    }
  }
  return specs;
}

namespace {

absl::Status CheckParam(const ModuleSpec& m, const ParamShape& p) {
  const std::string where = absl::StrFormat("module '%s', parameter '%s'", m.name, p.name);
  if (p.name.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat("module '%s': empty parameter name", m.name));
  }
  if (p.shape.empty()) return absl::InvalidArgumentError(where + ": shape has no dimensions");
  if (std::count(p.shape.begin(), p.shape.end(), 0) > 0) {
    return absl::InvalidArgumentError(where + ": shape has a zero dimension");
  }
  if (p.numel() > kMaxNumel) {
    return absl::InvalidArgumentError(where + ": more than 2^58 elements");
  }
  return absl::OkStatus();
}

absl::Status CheckForward(const ModelSpec& model) {
  std::vector<bool> used(model.modules.size(), model.forward.empty());
  for (int m : model.forward) {
    if (m < 0 || m >= static_cast<int>(model.modules.size())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("forward use of module #%d, which does not exist", m));
    }
    used[m] = true;
  }
  for (size_t m = 0; m < used.size(); ++m) {
    if (!used[m]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("module '%s' is never used in the forward order", model.modules[m].name));
    }
  }
  if (!model.sites.empty() && model.sites.size() != model.ForwardOrder().size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sites for %d forward uses", model.sites.size(), model.ForwardOrder().size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Validate(const ModelSpec& model) {
  if (model.modules.empty()) return absl::InvalidArgumentError("the model has no modules");
  absl::flat_hash_set<std::string> module_names, full_names;
  uint64_t total = 0;
  for (const ModuleSpec& m : model.modules) {
    if (m.name.empty()) return absl::InvalidArgumentError("a module has an empty name");
    if (!module_names.insert(m.name).second) {
      return absl::InvalidArgumentError(absl::StrFormat("duplicate module name '%s'", m.name));
    }
    if (m.params.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("module '%s' has no parameters", m.name));
    }
    absl::flat_hash_set<std::string> param_names;
    for (const ParamShape& p : m.params) {
      if (absl::Status s = CheckParam(m, p); !s.ok()) return s;
      if (!param_names.insert(p.name).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("module '%s': duplicate parameter name '%s'", m.name, p.name));
      }
      if (!full_names.insert(m.name + "." + p.name).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("module '%s': parameter '%s' is named '%s.%s' like another one", m.name,
                            p.name, m.name, p.name));
      }
      total += p.numel();
      if (total > kMaxNumel) return absl::InvalidArgumentError("more than 2^58 parameters in all");
    }
  }
  return CheckForward(model);
}

ModelBuilder& ModelBuilder::Module(std::string name) {
  model_.modules.push_back({std::move(name), {}});
  return *this;
}

ModelBuilder& ModelBuilder::Param(std::string name, std::vector<uint64_t> shape) {
  model_.modules.back().params.push_back({std::move(name), std::move(shape)});
  return *this;
}

ModelBuilder& ModelBuilder::Use(const std::string& module, Site site) {
  if (site != Site::kNone || !model_.sites.empty()) {
    model_.sites.resize(model_.forward.size(), Site::kNone);
    model_.sites.push_back(site);
  }
  for (size_t m = model_.modules.size(); m-- > 0;) {  // recent modules first: builders use them
    if (model_.modules[m].name == module) {
      model_.forward.push_back(static_cast<int>(m));
      return *this;
    }
  }
  model_.forward.push_back(-1);  // Validate reports it
  return *this;
}

ModelBuilder& ModelBuilder::Shape(const TransformerShape& shape) {
  model_.transformer = shape;
  return *this;
}

}  // namespace zero::footprint
