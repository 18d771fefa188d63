// The words the command line and the reports use for the enums.
#pragma once

#include <optional>
#include <string_view>

#include "footprint/activations.h"
#include "footprint/formulas.h"
#include "zero/config.h"

namespace zero::footprint {

std::string_view Name(Precision p);      // fp32, bf16, fp16
std::string_view Name(OptimizerKind o);  // adam, sgd
std::string_view Name(Offload o);        // none, optimizer, parameters
std::string_view Name(OffloadDevice d);  // cpu, nvme
std::string_view Name(Attention a);      // eager, sdpa, flash
std::string_view Name(Kernels k);        // fused, transformers
std::string_view Name(Backend b);        // gpu, cpu
std::string_view Name(Checkpointing c);  // none, selective, full

std::optional<Precision> ParsePrecision(std::string_view text);
std::optional<OptimizerKind> ParseOptimizer(std::string_view text);
std::optional<Offload> ParseOffload(std::string_view text);
std::optional<OffloadDevice> ParseOffloadDevice(std::string_view text);
std::optional<Attention> ParseAttention(std::string_view text);
std::optional<Kernels> ParseKernels(std::string_view text);
std::optional<Backend> ParseBackend(std::string_view text);
std::optional<Checkpointing> ParseCheckpointing(std::string_view text);

}  // namespace zero::footprint
