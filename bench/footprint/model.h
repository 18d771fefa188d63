// A model as the footprint experiment sees it: named modules (each one
// stage-3 fetch unit, e.g. a transformer sub-layer) holding named parameter
// shapes, and the order in which a forward pass uses the modules. A module
// may be used more than once (GPT-2's tied embedding is used first for the
// input and last for the logits); backward runs the uses in reverse and
// hands a module's gradients over at its last backward use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "zero/layout.h"

namespace zero::footprint {

struct ParamShape {
  std::string name;
  std::vector<uint64_t> shape;
  uint64_t numel() const;
};

struct ModuleSpec {
  std::string name;
  std::vector<ParamShape> params;
  uint64_t numel() const;
};

struct ModelSpec {
  std::string name;
  std::vector<ModuleSpec> modules;
  std::vector<int> forward;  // module indices; empty means each module once, in order

  uint64_t numel() const;                 // Ψ
  uint64_t largest_module_numel() const;  // DeepSpeed's largest_layer_params
  // The forward uses (`forward`, or 0..modules-1 when empty).
  std::vector<int> ForwardOrder() const;
  // One ParamSpec per parameter, named "module.param", module by module:
  // a module's parameters have consecutive ids.
  std::vector<ParamSpec> ToParamSpecs() const;
};

// InvalidArgument naming the first problem: no modules, a module without
// parameters, an empty or repeated name, a shape with no or zero
// dimensions, a numel beyond 2^62, a forward use out of range, a module
// never used.
absl::Status Validate(const ModelSpec& model);

// Builds presets: Add("h.0.attn").Param("c_attn.weight", {768, 2304}) ...
class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name) { model_.name = std::move(name); }
  ModelBuilder& Module(std::string name);
  ModelBuilder& Param(std::string name, std::vector<uint64_t> shape);
  // Appends a use of the named module to the forward order (call it for
  // every use, or never to use each module once in order).
  ModelBuilder& Use(const std::string& module);
  ModelSpec Build() && { return std::move(model_); }

 private:
  ModelSpec model_;
};

}  // namespace zero::footprint
