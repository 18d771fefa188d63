// A model as the footprint experiment sees it: named modules (each one
// stage-3 fetch unit, e.g. a transformer sub-layer) holding named parameter
// shapes, and the order in which a forward pass uses the modules. A module
// may be used more than once (GPT-2's tied embedding is used first for the
// input and last for the logits); backward runs the uses in reverse and
// hands a module's gradients over at its last backward use. A transformer
// model also says what each forward use computes (its site), so the
// experiment can create that use's activations (activations.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "footprint/transformer_shape.h"
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

// What a forward use of a module computes. A layer is one kAttention use
// and the next kMlp use; the k-th of each belong to layer k. kExpert: an
// expert of the mixture whose router is the layer's kMlp use (that site's
// activations stand for the whole mixture's; the expert is the layer's
// module all the same, fetched again when full checkpointing recomputes).
enum class Site { kNone, kEmbedding, kAttention, kMlp, kHead, kExpert };

struct ModelSpec {
  std::string name;
  std::vector<ModuleSpec> modules;
  std::vector<int> forward;  // module indices; empty means each module once, in order
  // Transformer models only (else nullopt and empty): the shape, and a site
  // per forward use (parallel to ForwardOrder()).
  std::optional<TransformerShape> transformer;
  std::vector<Site> sites;

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
// dimensions, a numel beyond 2^58 (16 bytes each must fit in 64 bits), a forward use out of range, a module
// never used, sites that do not match the forward uses.
absl::Status Validate(const ModelSpec& model);

// Builds presets: Add("h.0.attn").Param("c_attn.weight", {768, 2304}) ...
class ModelBuilder {
 public:
  explicit ModelBuilder(std::string name) { model_.name = std::move(name); }
  ModelBuilder& Module(std::string name);
  ModelBuilder& Param(std::string name, std::vector<uint64_t> shape);
  // Appends a use of the named module to the forward order (call it for
  // every use, or never to use each module once in order), with its site
  // (give every use one, or none).
  ModelBuilder& Use(const std::string& module, Site site = Site::kNone);
  ModelBuilder& Shape(const TransformerShape& shape);
  ModelSpec Build() && { return std::move(model_); }

 private:
  ModelSpec model_;
};

}  // namespace zero::footprint
