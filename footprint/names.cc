#include "footprint/names.h"

#include <initializer_list>

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

std::string_view Name(OffloadDevice d) {
  return d == OffloadDevice::kNvme ? "nvme" : "cpu";
}

std::string_view Name(Attention a) {
  switch (a) {
    case Attention::kEager: return "eager";
    case Attention::kSdpa: return "sdpa";
    case Attention::kFlash: return "flash";
  }
  return "?";
}

std::string_view Name(Kernels k) { return k == Kernels::kFused ? "fused" : "transformers"; }

std::string_view Name(Backend b) { return b == Backend::kGpu ? "gpu" : "cpu"; }

std::string_view Name(Checkpointing c) {
  switch (c) {
    case Checkpointing::kNone: return "none";
    case Checkpointing::kSelective: return "selective";
    case Checkpointing::kFull: return "full";
  }
  return "?";
}

namespace {

// The value of `kinds` whose Name is `text`.
template <typename E>
std::optional<E> ByName(std::string_view text, std::initializer_list<E> kinds) {
  for (E e : kinds) {
    if (text == Name(e)) return e;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Precision> ParsePrecision(std::string_view text) {
  return ByName(text, {Precision::kF32, Precision::kBF16, Precision::kF16});
}

std::optional<OptimizerKind> ParseOptimizer(std::string_view text) {
  return ByName(text, {OptimizerKind::kAdam, OptimizerKind::kSgd});
}

std::optional<Offload> ParseOffload(std::string_view text) {
  return ByName(text, {Offload::kNone, Offload::kOptimizer, Offload::kParameters});
}

std::optional<OffloadDevice> ParseOffloadDevice(std::string_view text) {
  return ByName(text, {OffloadDevice::kCpu, OffloadDevice::kNvme});
}

std::optional<Attention> ParseAttention(std::string_view text) {
  return ByName(text, {Attention::kEager, Attention::kSdpa, Attention::kFlash});
}

std::optional<Kernels> ParseKernels(std::string_view text) {
  return ByName(text, {Kernels::kFused, Kernels::kTransformers});
}

std::optional<Backend> ParseBackend(std::string_view text) {
  return ByName(text, {Backend::kGpu, Backend::kCpu});
}

std::optional<Checkpointing> ParseCheckpointing(std::string_view text) {
  return ByName(text, {Checkpointing::kNone, Checkpointing::kSelective, Checkpointing::kFull});
}

}  // namespace zero::footprint
