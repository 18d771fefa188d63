#include "bench/footprint/names.h"

namespace zero::footprint {

std::string_view Name(Precision p) {
  switch (p) {
    case Precision::kF32: return "fp32";
    case Precision::kBF16: return "bf16";
    case Precision::kF16: return "fp16";
  }
  return "?";
}

std::string_view Name(OptimizerKind o) { return o == OptimizerKind::kAdam ? "adam" : "sgd"; }

std::string_view Name(Offload o) {
  switch (o) {
    case Offload::kNone: return "none";
    case Offload::kOptimizer: return "optimizer";
    case Offload::kParameters: return "parameters";
  }
  return "?";
}

std::optional<Precision> ParsePrecision(std::string_view text) {
  for (Precision p : {Precision::kF32, Precision::kBF16, Precision::kF16}) {
    if (text == Name(p)) return p;
  }
  return std::nullopt;
}

std::optional<OptimizerKind> ParseOptimizer(std::string_view text) {
  for (OptimizerKind o : {OptimizerKind::kAdam, OptimizerKind::kSgd}) {
    if (text == Name(o)) return o;
  }
  return std::nullopt;
}

std::optional<Offload> ParseOffload(std::string_view text) {
  for (Offload o : {Offload::kNone, Offload::kOptimizer, Offload::kParameters}) {
    if (text == Name(o)) return o;
  }
  return std::nullopt;
}

}  // namespace zero::footprint
