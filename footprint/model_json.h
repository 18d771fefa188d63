// Models from JSON files (--model=path.json): a Hugging Face config.json
// (an object with "model_type": hf_config.h), or a list of modules. The
// schema of the latter:
//
//   {
//     "name": "my-model",                  optional; default: the file name
//     "modules": [ENTRY, ...],             required, not empty
//     "forward": ["module", ...]           optional: the forward pass's module
//   }                                        uses, by full name; a name may
//                                            repeat (tied weights); default:
//                                            every module once, in order
//   ENTRY, a module:  {"name": "attn", "params": [PARAM, ...], "repeat": 2}
//   ENTRY, a group:   {"name": "layer", "modules": [ENTRY, ...], "repeat": 32}
//   PARAM:            {"name": "wq", "shape": [4096, 4096]}
//
// A module is one stage-3 fetch unit. A group only names: its modules are
// called "layer.attn", or with "repeat": n, "layer.0.attn" ... "layer.<n-1>.attn"
// (a repeated module is "attn.0" ...). Parameters are "module.param". Shapes
// are non-empty arrays of integers >= 1. Unknown keys, duplicate module or
// parameter names, unknown or missing forward uses are errors; every error
// says FILE:LINE:COL of the value at fault.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "footprint/model.h"

namespace zero::footprint {

// What a model file may expand to. A repeated entry that would take the
// model past one is refused before it is expanded, with one line that names
// the limit and the nested repeats that multiply, e.g.
//   m.json:3:17: "layers" repeat 1000000 x "experts" repeat 1000000 = 1e+12
//   modules, over the limit of 2000000 modules
// (modules: stage-3 fetch units; parameters: tensors; bytes of names: the
// expanded "module" and "module.param" names, which the engine keeps).
inline constexpr uint64_t kMaxModelModules = 2'000'000;
inline constexpr uint64_t kMaxModelParams = 8'000'000;
inline constexpr uint64_t kMaxModelNameBytes = uint64_t{512} << 20;
inline constexpr uint64_t kMaxModelFileBytes = uint64_t{64} << 20;  // LoadModelFile

// `file` names the source in errors (and is the default model name).
absl::StatusOr<ModelSpec> ModelFromJson(std::string_view text, const std::string& file);
// Reads `path` and calls ModelFromJson.
absl::StatusOr<ModelSpec> LoadModelFile(const std::string& path);

}  // namespace zero::footprint
